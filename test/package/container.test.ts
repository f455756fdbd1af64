/**
 * packaging/Containerfile built into an image and run: the single binary as a user
 * of its own, the state in the volume (kept across a restart), a completion through the
 * container from the openai SDK, and a SIGTERM stop that exits 0. Behind `npm run test:dist`;
 * `.ci/run` provides the engine (.ci/container-engine.sh). Where no engine answers it is skipped
 * with the reason printed, except under CI, where that is a failure.
 */
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SimProcess, eventually, startSimulate } from '../helpers/processes.js';
import { freePort } from '../helpers/free-port.js';

const ROOT = resolve(import.meta.dirname, '../..');
const FILE = join(ROOT, 'packaging/Containerfile');
const MODEL = 'gemma4:26b';
const { version } = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };

function findEngine(): string | null {
  for (const e of ['podman', 'docker']) {
    try {
      execFileSync(e, ['info'], { stdio: 'ignore', timeout: 20_000 });
      return e;
    } catch {
      // not installed, or no daemon answering
    }
  }
  return null;
}
const engine = findEngine();
const inCi = process.env.CI !== undefined && process.env.CI !== '' && process.env.CI !== 'false';
if (engine === null && !inCi)
  console.log('container.test: no container engine answers here (podman or docker); skipped');

function run(args: string[], timeoutMs = 120_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(engine!, args, { timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
      done({ code, stdout, stderr });
    });
  });
}

async function ok(args: string[], timeoutMs?: number): Promise<string> {
  const r = await run(args, timeoutMs);
  if (r.code !== 0) throw new Error(`${engine} ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return r.stdout;
}

const tag = `localhost/ob-proxy-test:${process.pid}`;
const name = `ob-proxy-test-${process.pid}`;
let context: string;
let sim: SimProcess;

describe.skipIf(engine === null && !inCi)('packaging/Containerfile, built and run', () => {
  beforeAll(async () => {
    if (engine === null)
      throw new Error(
        'no container engine answers (podman or docker): .ci/run sets one up with .ci/container-engine.sh',
      );
    if (!existsSync(join(ROOT, 'dist-bin/ob-proxy')))
      execFileSync('npm', ['run', 'build:binary'], { cwd: ROOT, stdio: 'ignore', timeout: 540_000 });
    // A context of the binary alone: the checkout (node_modules) would be sent to the engine whole.
    context = await mkdtemp(join(tmpdir(), 'obctx-'));
    await mkdir(join(context, 'dist-bin'));
    await copyFile(join(ROOT, 'dist-bin/ob-proxy'), join(context, 'dist-bin/ob-proxy'));
    await ok(['build', '-q', '-f', FILE, '-t', tag, context], 540_000);
    sim = await startSimulate([MODEL]);
  }, 600_000);

  afterAll(async () => {
    await sim?.stop();
    if (engine !== null) {
      await run(['rm', '-f', '-v', name]);
      await run(['rmi', '-f', tag]);
    }
    if (context !== undefined) await rm(context, { recursive: true, force: true });
  });

  it('runs the binary as its own user (10001), with the home 0700 and its own', async () => {
    const out = await ok([
      'run',
      '--rm',
      '--entrypoint',
      '/bin/sh',
      tag,
      '-c',
      'id -u && ob-proxy --version && stat -c %a:%u /var/lib/ob-proxy',
    ]);
    expect(out.trim().split('\n')).toEqual(['10001', version, '700:10001']);
  });

  it('serves a completion to the openai SDK, keeps its keys in the volume across a restart, and stops on SIGTERM with exit 0', async () => {
    const port = await freePort();
    // The host's network: the simulator listens on the host's loopback, as a model server would on its own.
    await ok([
      'run',
      '-d',
      '--name',
      name,
      '--network',
      'host',
      '-e',
      'OB_PROXY_HOST=127.0.0.1',
      '-e',
      `OB_PROXY_PORT=${port}`,
      tag,
    ]);
    const cli = async <T>(args: string[]): Promise<T> =>
      JSON.parse(await ok(['exec', name, 'ob-proxy', ...args, '--json'])) as T;
    await eventually(
      async () => (await run(['exec', name, 'ob-proxy', 'instances', 'list', '--json'])).code === 0,
      'the daemon in the container',
      60_000,
    );
    await cli(['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url]);
    const ready = await cli<{ state: string; defaultKey: { secret: string } }>(['instances', 'ready', 'gpu-1']);
    expect(ready.state).toBe('ready');
    const secret = ready.defaultKey.secret;

    const ask = async (): Promise<string | null | undefined> => {
      const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: secret, maxRetries: 0 });
      const reply = await client.chat.completions.create({
        model: MODEL,
        messages: [{ role: 'user', content: 'Hello' }],
      });
      return reply.choices[0]?.message.content;
    };
    expect(await ask()).toBe('t0 t1 t2 t3 t4 t5 t6 t7 ');
    const seen = await sim.requests();
    expect(seen.at(-1)).toMatchObject({ method: 'POST', path: '/v1/chat/completions', body: { model: MODEL } });

    // SIGTERM (the image's STOPSIGNAL): the daemon drains and exits 0, well within the engine's grace.
    await ok(['stop', '-t', '45', name], 90_000);
    expect((await ok(['inspect', name, '--format', '{{.State.ExitCode}}'])).trim()).toBe('0');
    const logs = await run(['logs', name]);
    const lines = `${logs.stdout}${logs.stderr}`;
    // JSON logs (OB_PROXY_LOG_FORMAT=json in the image), and never the secret.
    expect(lines).toMatch(/^\{.*"msg":"ob-proxy serving"/m);
    expect(lines).not.toContain(secret);

    // The same container started again: the store in its volume still holds the key.
    await ok(['start', name]);
    expect(await eventually(() => ask().catch(() => undefined), 'the key after a restart', 60_000)).toBe(
      't0 t1 t2 t3 t4 t5 t6 t7 ',
    );
    await ok(['stop', '-t', '45', name], 90_000);
  }, 300_000);
});
