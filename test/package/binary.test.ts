/**
 * The single binary: `npm run build:binary`, then dist-bin/ob-proxy, copied out of
 * the checkout, runs every command with no Node to find. Each run gets an empty folder as PATH
 * and, where this process may make a mount namespace (root, as in CI, or an unprivileged user
 * namespace), also finds every `node` on the host replaced by /dev/null and the checkout
 * and its node_modules hidden under empty tmpfs mounts: nothing the binary needs may come from
 * outside it. Behind `npm run test:dist`; `.ci/run` runs it.
 */
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { realpathSync } from 'node:fs';
import { copyFile, mkdir, mkdtemp, open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import OpenAI from 'openai';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeJail, nodesOnThisMachine, quote } from '../helpers/no-node-jail.js';
import { type SimRequest, eventually, tmpHome } from '../helpers/processes.js';
import { freshDatabase, type TestDatabase } from '../helpers/postgres.js';
import { spawnTerminal } from '../helpers/terminal.js';

const ROOT = resolve(import.meta.dirname, '../..');
const MODEL = 'gemma4:26b';
const { version } = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };

let work: string;
let bin: string;
let emptyPath: string;
/** Prepended to every command run "on a machine with no Node": the mount namespace, if any. */
let jail: string[] = [];

function env(home: string): NodeJS.ProcessEnv {
  return { PATH: emptyPath, HOME: home, NO_COLOR: '1' };
}

function command(args: string[]): [string, string[]] {
  const all = [...jail, bin, ...args];
  return [all[0]!, all.slice(1)];
}

function run(args: string[], home: string): Promise<{ code: number; stdout: string; stderr: string }> {
  const [cmd, rest] = command(args);
  return new Promise((done) => {
    execFile(cmd, rest, { env: env(home), timeout: 30_000 }, (err, stdout, stderr) => {
      done({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr });
    });
  });
}

async function json<T>(args: string[], home: string): Promise<T> {
  const r = await run([...args, '--home', home, '--json'], home);
  if (r.code !== 0) throw new Error(`ob-proxy ${args.join(' ')} exited ${r.code}: ${r.stderr}`);
  return JSON.parse(r.stdout) as T;
}

interface Proc {
  proc: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

function start(args: string[], home: string): Proc {
  const [cmd, rest] = command(args);
  const proc = spawn(cmd, rest, { env: env(home), stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout!.setEncoding('utf8').on('data', (s: string) => {
    out += s;
  });
  proc.stderr!.setEncoding('utf8').on('data', (s: string) => {
    err += s;
  });
  const exited = new Promise<number | null>((r) => proc.once('exit', (code) => r(code)));
  return {
    proc,
    exited,
    out: () => out,
    err: () => err,
    stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
}

/** The first stdout line that holds `text`, once it is there. */
function line(p: Proc, text: string, what: string, timeoutMs = 30_000): Promise<string> {
  return eventually(
    () => {
      if (p.proc.exitCode !== null) throw new Error(`${what} exited ${p.proc.exitCode}: ${p.err()}${p.out()}`);
      return (
        p
          .out()
          .split('\n')
          .find((l) => l.includes(text) && p.out().includes(`${l}\n`)) ?? false
      );
    },
    what,
    timeoutMs,
  );
}

let home: string;
let serve: Proc;
let sim: Proc;
let baseUrl: string;
let simUrl: string;

beforeAll(async () => {
  const built = await new Promise<{ code: number; output: string }>((done) => {
    execFile(
      'npm',
      ['run', 'build:binary'],
      { cwd: ROOT, timeout: 540_000, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => {
        done({ code: err === null ? 0 : 1, output: `${stdout}${stderr}` });
      },
    );
  });
  expect(built.code, built.output).toBe(0);
  work = await mkdtemp(join(tmpdir(), 'obbin-'));
  // Out of the checkout, which the jail hides.
  bin = join(work, 'ob-proxy');
  await copyFile(join(ROOT, 'dist-bin', 'ob-proxy'), bin);
  emptyPath = join(work, 'empty-path');
  await mkdir(emptyPath);
  jail = makeJail(ROOT);

  home = await tmpHome();
  serve = start(['serve', '--home', home, '--port', '0'], home);
  sim = start(['simulate', '--port', '0', '--model', MODEL], home);
  baseUrl = (JSON.parse(await line(serve, '"ob-proxy serving"', 'serve')) as { baseUrl: string }).baseUrl;
  simUrl = (JSON.parse(await line(sim, 'simulator listening', 'simulate')) as { url: string }).url;
});

afterAll(async () => {
  await serve?.stop();
  await sim?.stop();
  if (work !== undefined) await rm(work, { recursive: true, force: true });
});

describe('the single binary', () => {
  it('is one native executable, and where it runs there is no node, no checkout and no node_modules', async () => {
    const head = Buffer.alloc(4);
    const f = await open(bin);
    await f.read(head, 0, 4, 0);
    await f.close();
    expect(head.toString('latin1')).toBe('\x7fELF');
    const [cmd, rest] = jail.length === 0 ? ['/bin/sh', []] : [jail[0]!, [...jail.slice(1), '/bin/sh']];
    const probe = `command -v node || echo 'no node on PATH'; ${nodesOnThisMachine()
      .map((n) => `${quote(n)} --version 2>/dev/null || echo 'no ${n}'`)
      .join('; ')}`;
    const seen = execFileSync(cmd, [...rest, '-c', probe], { env: { PATH: emptyPath }, encoding: 'utf8' });
    expect(seen.trim().split('\n')[0]).toBe('no node on PATH');
    if (jail.length > 0) {
      expect(seen.trim().split('\n').slice(1)).toEqual(nodesOnThisMachine().map((n) => `no ${n}`));
      const listed = execFileSync(
        jail[0]!,
        [...jail.slice(1), '/bin/ls', '-A', ROOT, realpathSync(join(ROOT, 'node_modules'))],
        { encoding: 'utf8' },
      );
      expect(listed.split('\n').filter((l) => l !== '' && !l.endsWith(':'))).toEqual([]);
    }
  });

  it('prints its version and its help', async () => {
    expect(await run(['--version'], home)).toEqual({ code: 0, stdout: `${version}\n`, stderr: '' });
    const help = await run(['--help'], home);
    expect([help.code, help.stderr]).toEqual([0, '']);
    for (const c of ['serve', 'instances', 'keys', 'console', 'simulate', 'demo'])
      expect(help.stdout).toMatch(new RegExp(`^  ${c} `, 'm'));
  });

  it('serve and simulate from the binary: instances add/ready, a completion and a stream through the openai SDK, keys list', async () => {
    const added = await json<{ id: string; state: string }>(
      ['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', simUrl],
      home,
    );
    expect([added.id, added.state]).toEqual(['gpu-1', 'pending']);
    const ready = await json<{ state: string; defaultKey: { name: string; secret: string } }>(
      ['instances', 'ready', 'gpu-1'],
      home,
    );
    expect([ready.state, ready.defaultKey.name]).toEqual(['ready', 'default']);
    const made = await json<{ name: string; secret: string }>(
      ['keys', 'create', '--instance', 'gpu-1', '--name', 'sdk'],
      home,
    );
    expect(made.secret).toMatch(/^ob_sk_[0-9A-Za-z]{12}_[0-9A-Za-z]{38}$/);

    const client = new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey: made.secret, maxRetries: 0 });
    const reply = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hello' }],
    });
    expect(reply).toMatchObject({ object: 'chat.completion', model: MODEL });
    expect(reply.id).toMatch(/^chatcmpl-/);
    expect(reply.choices).toEqual([
      { index: 0, message: { role: 'assistant', content: 't0 t1 t2 t3 t4 t5 t6 t7 ' }, finish_reason: 'stop' },
    ]);

    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Stream' }],
      stream: true,
    });
    let text = '';
    const finish: (string | null)[] = [];
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? '';
      if (chunk.choices[0]?.finish_reason) finish.push(chunk.choices[0].finish_reason);
    }
    expect([text, finish]).toEqual(['t0 t1 t2 t3 t4 t5 t6 t7 ', ['stop']]);

    // The model server got both, without the client's key (and the daemon's health probe asked it
    // for its models first).
    const all = (await (await fetch(`${simUrl}/_sim/requests`)).json()) as SimRequest[];
    expect(all[0]).toMatchObject({ method: 'GET', path: '/v1/models', body: null });
    const seen = all.filter((r) => r.path === '/v1/chat/completions');
    expect(
      seen.map((r) => [
        r.path,
        (r.body as { messages: unknown }).messages,
        (r.body as { stream?: boolean }).stream,
        r.headers.authorization,
      ]),
    ).toEqual([
      ['/v1/chat/completions', [{ role: 'user', content: 'Hello' }], undefined, undefined],
      ['/v1/chat/completions', [{ role: 'user', content: 'Stream' }], true, undefined],
    ]);

    const listed = await json<{ name: string; status: string; instance: string }[]>(['keys', 'list'], home);
    expect(listed.map((k) => [k.instance, k.name, k.status])).toEqual([
      ['gpu-1', 'default', 'active'],
      ['gpu-1', 'sdk', 'active'],
    ]);
    expect(JSON.stringify(listed)).not.toContain(made.secret);
    expect(JSON.stringify(listed)).not.toContain(ready.defaultKey.secret);
  });

  it('runs the console in a real terminal: its first screen, live, and q quits with 0', async () => {
    const errFile = join(work, 'console.err');
    // env -i: the console gets the empty PATH and nothing else. DEV=true would make Ink look for
    // its package.json and React DevTools, which the binary does not hold.
    const argv = [
      '/usr/bin/env',
      '-i',
      `PATH=${emptyPath}`,
      `HOME=${home}`,
      'TERM=xterm-256color',
      'DEV=true',
      ...jail,
      bin,
      'console',
      '--home',
      home,
    ];
    const term = spawnTerminal('/bin/sh', ['-c', `${argv.map(quote).join(' ')} 2> ${quote(errFile)}`], {
      cols: 110,
      rows: 30,
      env: { PATH: emptyPath },
    });
    try {
      // The whole first screen: the selected instance's line under the table can come a frame later.
      const screen = await term.waitFor(
        (s) => s.includes('● live') && s.includes('Ready: Enter shows its keys') && s.includes('q quit'),
        "the console's first screen",
        30_000,
      );
      expect(screen).toContain(`ob-proxy console · ${baseUrl} · ● live`);
      expect(screen).toContain('[1 Instances (1)] 2 Keys: gpu-1 (2)  3 Revocations');
      // `instances ready` probed the simulator: HEALTH reachable, as `instances list` says it; no pack end.
      expect(screen).toMatch(
        new RegExp(`› gpu-1 +gemma4:26b +ready +reachable +${simUrl.replaceAll('.', '\\.')} +- +2\\n`),
      );
      expect(screen).toContain(`gpu-1 · gemma4:26b · ${simUrl}\n  Ready: Enter shows its keys, n generates a new one.`);
      expect(screen).toContain('q quit');
      term.write('q');
      expect(await term.exited).toBe(0);
      // Nothing on stderr but the cursor shown again on the way out.
      expect((await readFile(errFile, 'utf8')).replaceAll('\x1b[?25h', '')).toBe('');
    } finally {
      await term.close();
    }
  });

  it('runs the demo: its curl line gets a completion, and the CLI command it prints is the binary itself', async () => {
    const demoHome = await tmpHome();
    const demo = start(['demo', '--port', '0', '--home', demoHome], demoHome);
    try {
      await line(demo, 'Press Ctrl-C to stop.', 'the demo');
      const lines = demo.out().split('\n');
      const exported = lines.find((l) => l.startsWith('export OB_KEY='))!;
      const curl = lines.find((l) => l.startsWith('printf ') && l.includes('| curl '))!;
      // curl and bash are the user's tools, not the binary's: this shell may have them on PATH.
      const r = execFileSync('bash', ['-c', `${exported}\n${curl}`], { encoding: 'utf8' });
      expect(JSON.parse(r)).toMatchObject({
        object: 'chat.completion',
        model: MODEL,
        choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant' } }],
      });
      expect(lines).toContain(
        `Manage it from another terminal: ${bin} instances list --home ${demoHome}   (or: ${bin} console --home ${demoHome})`,
      );
      const instances = await json<{ id: string; model: string; state: string }[]>(['instances', 'list'], demoHome);
      expect(instances.map((i) => [i.id, i.model, i.state])).toEqual([
        ['demo-gemma4', 'gemma4:26b', 'ready'],
        ['demo-qwen36', 'qwen3.6:27b', 'ready'],
      ]);
    } finally {
      expect(await demo.stop('SIGINT')).toBe(0);
    }
  });

  it('loads its optional parts from inside itself: the PostgreSQL store (pg), metrics (prom-client) and pretty logs (pino-pretty)', async () => {
    let db: TestDatabase | undefined;
    const pgHome = await tmpHome();
    let daemon: Proc | undefined;
    try {
      db = await freshDatabase();
      daemon = start(
        ['serve', '--home', pgHome, '--port', '0', '--store', db.url, '--metrics-port', '0', '--log-format', 'pretty'],
        pgHome,
      );
      // pino-pretty's lines: a time in brackets, the level, the message, then its fields indented.
      await line(daemon, 'INFO: ob-proxy serving', 'serve with pretty logs');
      const metricsUrl = await eventually(
        () => /^ {4}metrics: "(http:\/\/[^"]+)"$/m.exec(daemon!.out())?.[1],
        'the metrics address',
      );
      expect(daemon.out()).toMatch(
        /^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [+-]\d{4}\] INFO: ob-proxy serving\n {4}baseUrl: "http:\/\/127\.0\.0\.1:\d+"$/m,
      );
      expect(daemon.out()).not.toMatch(/^\{/m);

      await json(['instances', 'add', 'pg-1', '--model', MODEL, '--endpoint', simUrl], pgHome);
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        const rows = (await c.query<{ id: string; state: string }>('SELECT id, state FROM ob_instances')).rows;
        expect(rows).toEqual([{ id: 'pg-1', state: 'pending' }]);
      } finally {
        await c.end();
      }

      const metrics = await (await fetch(metricsUrl)).text();
      expect(metrics).toContain('# TYPE ob_proxy_requests_total counter');
      expect(metrics).toContain('# TYPE ob_proxy_process_cpu_user_seconds_total counter');
      expect(await daemon.stop()).toBe(0);
      expect(daemon.out()).toMatch(/INFO: stopped\n/);
    } finally {
      await daemon?.stop();
      await db?.drop();
    }
  });
});
