/**
 * The console in a real terminal: tmux runs `ob-proxy console` against a real `serve` and a real
 * simulated instance; keys go in with send-keys, the screen comes back with capture-pane.
 * tmux runs on a private socket with no user config, so it never touches anyone's sessions.
 * CI installs tmux (.ci/run); nothing here is skipped.
 */
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI, { APIError } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  BIN,
  NODE,
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
const SECRET = /ob_sk_[0-9A-Za-z]{12}_[0-9A-Za-z]{38}/;

let home: string;
let serve: ServeProcess;
let sim: SimProcess;
let tmuxSocket: string;

function tmux(...args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('tmux', ['-S', tmuxSocket, '-f', '/dev/null', ...args], { timeout: 10_000 }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`tmux ${args.join(' ')}: ${stderr || err.message}`));
      else resolve(stdout);
    });
  });
}

/**
 * Starts `ob-proxy console` in a detached 100×30 tmux session. The pane's shell writes the
 * console's exit status to `<home>/<session>.exit`: on a loaded machine tmux may take long to
 * reap an exited pane, so its own "pane dead" flag is not a reliable signal.
 */
async function startConsole(session: string, consoleHome: string): Promise<string> {
  const exitFile = join(consoleHome, `${session}.exit`);
  const command = `'${NODE}' '${BIN}' console --home '${consoleHome}'; echo $? > '${exitFile}'`;
  await tmux(
    'new-session',
    '-d',
    '-s',
    session,
    '-x',
    '100',
    '-y',
    '30',
    command,
    ';',
    'set-option',
    '-t',
    session,
    'remain-on-exit',
    'on',
  );
  return exitFile;
}

function screen(session: string): Promise<string> {
  return tmux('capture-pane', '-p', '-t', session);
}

/** Polls the pane until `match` holds; fails with the last screen. */
async function waitForScreen(
  session: string,
  match: string | RegExp | ((s: string) => boolean),
  what: string,
): Promise<string> {
  let last = '';
  try {
    return await eventually(
      async () => {
        last = await screen(session);
        const ok =
          typeof match === 'string' ? last.includes(match) : match instanceof RegExp ? match.test(last) : match(last);
        return ok ? last : false;
      },
      what,
      15_000,
    );
  } catch (err) {
    throw new Error(`${(err as Error).message}\n--- screen ---\n${last}`, { cause: err });
  }
}

function keys(session: string, ...k: string[]): Promise<string> {
  return tmux('send-keys', '-t', session, ...k);
}

function sdk(apiKey: string): OpenAI {
  return new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey, maxRetries: 0 });
}

beforeAll(async () => {
  home = await tmpHome();
  tmuxSocket = join(home, 'tmux.sock');
  [serve, sim] = await Promise.all([startServe(home), startSimulate([MODEL])]);
  await cliJson(['instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', sim.url], home);
  await cliJson(['instances', 'ready', 'gpu-1'], home);
});

afterAll(async () => {
  await tmux('kill-server').catch(() => {});
  await serve?.stop();
  await sim?.stop();
});

describe('ob-proxy console in a real terminal (tmux)', () => {
  it('generates a key that works through the proxy, hides it after Enter, revokes it (401 at once) and follows a stop made with the CLI', async () => {
    const exitFile = await startConsole('main', home);
    const first = await waitForScreen('main', '● live', 'the console to connect');
    // `instances ready` probed the simulator: HEALTH ok.
    expect(first).toMatch(/› gpu-1 +gemma4:26b +ready +ok +http:\/\/127\.0\.0\.1:\d+ +none +1\n/);

    // Choose the ready instance, name the key, generate it.
    await keys('main', 'n');
    await waitForScreen('main', '[1 instance]', 'the instance chooser');
    await keys('main', 'Enter');
    await waitForScreen('main', '[2 name]', 'the name step');
    await keys('main', '-l', 'tmux-key');
    await waitForScreen('main', 'Name: tmux-key', 'the typed name');
    await keys('main', 'Enter');
    const box = await waitForScreen('main', SECRET, 'the secret on screen');
    expect(box).toContain('New key "tmux-key" for gpu-1 · shown once');
    expect(box).toContain(`Base URL  ${serve.baseUrl}/v1`);
    const secret = SECRET.exec(box)![0];

    // The secret works through the proxy with the official SDK, and only gpu-1's model server saw the call.
    const before = (await sim.requests()).length;
    const reply = await sdk(secret).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hello' }],
    });
    expect(reply.choices).toEqual([
      { index: 0, message: { role: 'assistant', content: 't0 t1 t2 t3 t4 t5 t6 t7 ' }, finish_reason: 'stop' },
    ]);
    // Periodic health probes (GET /v1/models) may come in between: only calls count here.
    const seen = (await sim.requests()).slice(before).filter((r) => r.path !== '/v1/models');
    expect(seen.map((r) => [r.path, r.body, r.headers.authorization])).toEqual([
      ['/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'Hello' }] }, undefined],
    ]);
    const listed = await cliJson<{ name: string; status: string }[]>(['keys', 'list', '--instance', 'gpu-1'], home);
    expect(listed.map((k) => [k.name, k.status])).toEqual([
      ['default', 'active'],
      ['tmux-key', 'active'],
    ]);

    // Enter: the secret leaves the screen, and the alternate screen left nothing in the scrollback.
    await keys('main', 'Enter');
    const after = await waitForScreen('main', 'the console has forgotten its secret', 'the confirmation');
    expect(after).not.toContain(secret);
    expect(after).toMatch(/› tmux-key +ob_sk_…\w{4} +active/);
    expect(await tmux('capture-pane', '-p', '-t', 'main', '-S', '-', '-E', '-')).not.toContain(secret);

    // Revoke from the console: once the screen says revoked, the key is refused.
    await keys('main', 'x');
    await waitForScreen('main', 'Revoke key "tmux-key"', 'the confirmation naming the key');
    await keys('main', 'y');
    await waitForScreen('main', /tmux-key +ob_sk_…\w{4} +revoked/, 'the key shown revoked');
    const refused = await sdk(secret)
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello' }] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(APIError);
    expect([(refused as APIError).status, (refused as APIError).code]).toEqual([401, 'revoked_api_key']);

    // A stop made with the CLI shows on the console with no key pressed.
    expect((await runCli(['instances', 'stop', 'gpu-1'], { home })).code).toBe(0);
    const stopped = await waitForScreen('main', 'Keys of gpu-1 (gemma4:26b, stopped)', 'the stop, live');
    expect(stopped).toMatch(/default +ob_sk_…\w{4} +revoked/);
    expect(stopped).toContain('gpu-1 is now stopped: its keys were revoked.');

    // q twice (Keys pane, then Instances) quits, exit 0.
    await keys('main', 'q');
    await waitForScreen('main', '[1 Instances (1)]', 'the Instances pane');
    // The SDK calls above, in the live figures the daemon samples each second.
    const figures = await waitForScreen('main', /requests\/s +\S+ [▁▂▃▄▅▆▇█]*[▂▃▄▅▆▇█]/, 'a sparkline with the calls');
    expect(figures).toMatch(/open streams +0 [▁▂▃▄▅▆▇█]+/);
    await keys('main', 'q');
    const status = await eventually(
      () => readFile(exitFile, 'utf8').then((s) => s.endsWith('\n') && s.trim()),
      'the console to exit',
      15_000,
    );
    expect(status).toBe('0');
  });

  it('says the daemon is not running, without a stack, and connects when it starts', async () => {
    const other = await tmpHome();
    await startConsole('down', other);
    const down = await waitForScreen('down', 'not reachable', 'the message');
    expect(down).toContain('● daemon unreachable');
    expect(down.replace(/\s+/g, ' ')).toContain(`Cannot reach the ob-proxy daemon at ${join(other, 'ob-proxy.sock')}`);
    expect(down).not.toMatch(/^\s+at /m);
    const late = await startServe(other);
    try {
      const up = await waitForScreen('down', `ob-proxy console · ${late.baseUrl} · ● live`, 'the reconnection');
      expect(up).toContain('No instances yet.');
    } finally {
      await keys('down', 'q').catch(() => {});
      await late.stop();
    }
  });
});
