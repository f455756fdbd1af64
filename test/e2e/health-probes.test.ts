/**
 * Health probes: `instances ready` asks the model server for its models first and
 * refuses a dead endpoint or a missing model with a message naming the endpoint; `--no-probe`
 * skips that. Each ready instance is probed every --probe-interval: a model server that dies
 * shows as unreachable in `instances list` (JSON and table) and in the metrics within two
 * periods. Real daemon, real simulators, real CLI.
 */
import { writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ServeProcess,
  type SimProcess,
  cliJson,
  eventually,
  runCli,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';

const MODEL = 'gemma4:26b';

interface Health {
  status: string;
  checkedAt: string;
  error: string | null;
}
interface InstanceJson {
  id: string;
  state: string;
  activeKeys: number;
  health: Health | null;
}

const running: { stop(): Promise<unknown> }[] = [];
afterEach(async () => {
  for (const p of running.splice(0)) await p.stop();
});

async function serveOn(home: string, args: string[] = []): Promise<ServeProcess> {
  const s = await startServe(home, args);
  running.push(s);
  return s;
}

async function simulate(models: string[], args: string[] = []): Promise<SimProcess> {
  const s = await startSimulate(models, args);
  running.push(s);
  return s;
}

/** A port where nothing listens: bound, then closed. */
async function closedPort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise((r) => srv.close(r));
  return port;
}

describe('instances ready probes the endpoint first', () => {
  it('refuses a dead endpoint, naming it, and leaves the instance pending with no key', async () => {
    const home = await tmpHome();
    await serveOn(home, ['--probe-interval', '0']);
    const dead = `http://127.0.0.1:${await closedPort()}`;
    await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', dead], home);

    const r = await runCli(['instances', 'ready', 'gpu-1'], { home });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(
      `error: Instance gpu-1 was not made ready: GET ${dead}/v1/models: connection refused (is the model server running on that port?). Check the endpoint and that the model server is up, or skip this check with --no-probe.\n`,
    );

    const json = await runCli(['instances', 'ready', 'gpu-1', '--json'], { home });
    expect(json.code).toBe(1);
    expect(json.stdout).toBe('');
    const [inst] = await cliJson<InstanceJson[]>(['instances', 'list'], home);
    expect(inst).toMatchObject({ id: 'gpu-1', state: 'pending', activeKeys: 0, health: null });
    expect(await cliJson<unknown[]>(['keys', 'list'], home)).toEqual([]);

    // --no-probe: the operator knows better (the server is still loading, say).
    const forced = await cliJson<InstanceJson & { defaultKey: { secret: string } }>(
      ['instances', 'ready', 'gpu-1', '--no-probe'],
      home,
    );
    expect(forced.state).toBe('ready');
    expect(forced.defaultKey.secret).toMatch(/^ob_sk_/);
    expect(forced.health).toBeNull();
  });

  it('refuses an endpoint that does not serve the model, listing what it serves', async () => {
    const home = await tmpHome();
    const other = await simulate(['qwen3.6:27b']);
    await serveOn(home, ['--probe-interval', '0']);
    await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL], home);

    const r = await runCli(['instances', 'ready', 'gpu-1', '--endpoint', `${other.url}/v1`], { home });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      `error: Instance gpu-1 was not made ready: GET ${other.url}/v1/models: model ${MODEL} is not served (it serves: qwen3.6:27b). Pull or load the model on the model server, or skip this check with --no-probe.\n`,
    );
    const [inst] = await cliJson<(InstanceJson & { endpoint: string | null })[]>(['instances', 'list'], home);
    // Refused before anything was written: not even the endpoint given with it.
    expect(inst).toMatchObject({ state: 'pending', endpoint: null, activeKeys: 0 });
    // The probe asked for the list, and nothing else reached the model server.
    expect((await other.requests()).map((q) => `${q.method} ${q.path}`)).toEqual(['GET /v1/models']);
  });

  it("probes with the instance's upstream token, never a client key, and records the result", async () => {
    const home = await tmpHome();
    const sim = await simulate([MODEL]);
    await serveOn(home, ['--probe-interval', '0']);
    const tokenFile = join(home, 'upstream-token');
    await writeFile(tokenFile, 'vllm-token-123\n', { mode: 0o600 });
    await cliJson(
      ['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url, '--upstream-token-file', tokenFile],
      home,
    );
    const ready = await cliJson<InstanceJson>(['instances', 'ready', 'gpu-1'], home);
    expect(ready.health).toEqual({
      status: 'reachable',
      checkedAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/),
      error: null,
    });
    // One at `instances add` (does it list the model?), one at `ready`: both with the token.
    const probes = (await sim.requests()).filter((q) => q.path === '/v1/models');
    expect(probes.map((q) => q.headers.authorization)).toEqual(['Bearer vllm-token-123', 'Bearer vllm-token-123']);
    const [listed] = await cliJson<InstanceJson[]>(['instances', 'list'], home);
    expect(listed!.health).toEqual(ready.health);
  });
});

describe('periodic probes', () => {
  it('a restarted daemon probes its ready instances at once, not a period later', async () => {
    const home = await tmpHome();
    const sim = await simulate([MODEL]);
    const first = await serveOn(home, ['--probe-interval', '3600']);
    await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url], home);
    await cliJson(['instances', 'ready', 'gpu-1'], home);
    expect(await first.stop()).toBe(0);
    running.splice(running.indexOf(first), 1);
    // Results live in memory: a new daemon knows none until it probes, an hour from now but for the one at start.
    await serveOn(home, ['--probe-interval', '3600']);
    const health = await eventually(
      async () => (await cliJson<InstanceJson[]>(['instances', 'list'], home))[0]?.health ?? undefined,
      'the probe at start',
    );
    expect(health).toEqual({ status: 'reachable', checkedAt: expect.any(String), error: null });
  });

  it('a model server that dies shows as unreachable within two probe periods, in the list, the table and the metrics', async () => {
    const home = await tmpHome();
    const sim = await simulate([MODEL]);
    const periodMs = 1000;
    const serve = await serveOn(home, ['--probe-interval', String(periodMs / 1000), '--metrics-port', '0']);
    const metricsUrl = (serve.logs().find((l) => l.msg === 'ob-proxy serving') as { metrics: string }).metrics;
    await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url], home);
    await cliJson(['instances', 'ready', 'gpu-1'], home);

    // Probed again by the timer, not only at ready.
    await eventually(
      async () => (await sim.requests()).filter((q) => q.path === '/v1/models').length >= 2,
      'a periodic probe',
    );
    const table = await runCli(['instances', 'list'], { home });
    expect(table.stdout.split('\n')[0]).toMatch(
      /^ID\s+MODEL\s+ALIASES\s+STATE\s+HEALTH\s+KEYS\s+ENDPOINT\s+PACK ENDS$/,
    );
    expect(table.stdout.split('\n')[1]).toMatch(/^gpu-1\s+gemma4:26b\s+-\s+ready\s+reachable\s+1\s/);
    const gauge = async (): Promise<string> =>
      (await (await fetch(metricsUrl)).text())
        .split('\n')
        .filter((l) => l.startsWith('ob_proxy_instance_health{'))
        .sort()
        .join('\n');
    expect(await gauge()).toBe(
      [
        'ob_proxy_instance_health{instance="gpu-1",status="model missing"} 0',
        'ob_proxy_instance_health{instance="gpu-1",status="reachable"} 1',
        'ob_proxy_instance_health{instance="gpu-1",status="unreachable"} 0',
      ].join('\n'),
    );

    const killedAt = Date.now();
    await sim.stop('SIGKILL');
    const down = await eventually(
      async () => {
        const [i] = await cliJson<InstanceJson[]>(['instances', 'list'], home);
        return i?.health?.status === 'unreachable' ? i.health : undefined;
      },
      'the probe to see the dead server',
      10_000,
    );
    // The daemon's own clock says when it saw it: within two periods of the kill.
    expect(Date.parse(down.checkedAt) - killedAt).toBeLessThanOrEqual(2 * periodMs);
    expect(down.error).toBe(`GET ${sim.url}/v1/models: connection refused (is the model server running on that port?)`);
    expect((await runCli(['instances', 'list'], { home })).stdout.split('\n')[1]).toMatch(
      /^gpu-1\s+gemma4:26b\s+-\s+ready\s+unreachable\s+1\s/,
    );
    const show = await runCli(['instances', 'show', 'gpu-1'], { home });
    expect(show.stdout).toContain(`probe error  GET ${sim.url}/v1/models: connection refused`);
    expect(await gauge()).toContain('ob_proxy_instance_health{instance="gpu-1",status="unreachable"} 1');
    const warned = serve.logs().find((l) => l.msg === 'model server probe failed');
    expect(warned).toMatchObject({ level: 40, instance: 'gpu-1', health: 'unreachable', endpoint: sim.url });

    // Not ready any more: no health to show, no gauge.
    await cliJson(['instances', 'pending', 'gpu-1'], home);
    const [pending] = await cliJson<InstanceJson[]>(['instances', 'list'], home);
    expect(pending!.health).toBeNull();
    expect(await gauge()).toBe('');
  });
});
