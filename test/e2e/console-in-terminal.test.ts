/**
 * The console in a real terminal: `ob-proxy console` runs in a pseudo-terminal against a real
 * `serve` and a real simulated instance; keys go in as the terminal sends them, and the screen is
 * what a terminal draws of its output (test/helpers/terminal.ts). Nothing here is skipped.
 */
import { join } from 'node:path';
import OpenAI, { APIError } from 'openai';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  BIN,
  NODE,
  type ServeProcess,
  type SimProcess,
  cliJson,
  runCli,
  startServe,
  tmpHome,
} from '../helpers/processes.js';
import { startDaemonAndSim } from '../helpers/daemon-and-sim.js';
import { KEY, type Terminal, spawnTerminal } from '../helpers/terminal.js';

const MODEL = 'gemma4:26b';
const SECRET = /ob_sk_[0-9A-Za-z]{12}_[0-9A-Za-z]{38}/;

let home: string;
let serve: ServeProcess;
let sim: SimProcess;
const terminals: Terminal[] = [];

/** `ob-proxy console` on `consoleHome`, in a 100×30 terminal. */
function startConsole(consoleHome: string): Terminal {
  const t = spawnTerminal(NODE, [BIN, 'console', '--home', consoleHome], { cols: 100, rows: 30 });
  terminals.push(t);
  return t;
}

function sdk(apiKey: string): OpenAI {
  return new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey, maxRetries: 0 });
}

beforeAll(async () => {
  ({ home, sim, serve } = await startDaemonAndSim());
});

afterEach(async () => {
  for (const t of terminals.splice(0)) await t.close();
});

afterAll(async () => {
  await serve?.stop();
  await sim?.stop();
});

describe('ob-proxy console in a real terminal', () => {
  it('generates a key that works through the proxy, hides it after Enter, revokes it (401 at once) and follows a stop made with the CLI', async () => {
    const main = startConsole(home);
    // The whole first screen: its parts may come in more than one frame.
    const first = await main.waitFor(
      (s) => s.includes('● live') && s.includes('› gpu-1'),
      'the console to connect and list the instance',
    );
    // `instances ready` probed the simulator: HEALTH reachable, in the CLI's words; no pack end.
    expect(first).toMatch(/› gpu-1 +gemma4:26b +ready +reachable +http:\/\/127\.0\.0\.1:\S+ +- +1\n/);

    // Choose the ready instance, name the key, generate it.
    main.write('n');
    await main.waitFor('[1 instance]', 'the instance chooser');
    main.write(KEY.enter);
    await main.waitFor('[2 name]', 'the name step');
    main.write('term-key');
    await main.waitFor('Name: term-key', 'the typed name');
    main.write(KEY.enter);
    const box = await main.waitFor(SECRET, 'the secret on screen');
    expect(box).toContain('New key "term-key" for gpu-1 · shown once');
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
      ['term-key', 'active'],
    ]);

    // Enter: the secret leaves the screen, and the alternate screen left nothing in the scrollback.
    main.write(KEY.enter);
    // The Keys pane reads its page once shown: the frame with the key selected.
    const after = await main.waitFor(
      /› term-key +ob_sk_…\w{4} +active[\s\S]*the console has forgotten its secret/,
      'the confirmation',
    );
    expect(after).not.toContain(secret);
    expect(main.everything()).not.toContain(secret);

    // Revoke from the console: once the screen says revoked, the key is refused.
    main.write('x');
    await main.waitFor('Revoke key "term-key"', 'the confirmation naming the key');
    main.write('y');
    await main.waitFor(/term-key +ob_sk_…\w{4} +revoked/, 'the key shown revoked');
    const refused = await sdk(secret)
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello' }] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(APIError);
    expect([(refused as APIError).status, (refused as APIError).code]).toEqual([401, 'revoked_api_key']);

    // A stop made with the CLI shows on the console with no key pressed.
    expect((await runCli(['instances', 'stop', 'gpu-1'], { home })).code).toBe(0);
    // The instance and the keys page are read apart: the frame that has both.
    const stopped = await main.waitFor(
      /Keys of gpu-1 \(gemma4:26b, stopped\)[\s\S]*default +ob_sk_…\w{4} +revoked/,
      'the stop, live',
    );
    expect(stopped).toContain('gpu-1 is now stopped: its keys were revoked.');

    // q twice (Keys pane, then Instances) quits, exit 0.
    main.write('q');
    await main.waitFor('[1 Instances (1)]', 'the Instances pane');
    // The SDK calls above, in the live figures the daemon samples each second.
    const figures = await main.waitFor(/requests\/s +\S+ [▁▂▃▄▅▆▇█]*[▂▃▄▅▆▇█]/, 'a sparkline with the calls');
    expect(figures).toMatch(/open streams +0 [▁▂▃▄▅▆▇█]+/);
    main.write('q');
    expect(await main.exited).toBe(0);
  });

  it('extends a pack, rotates a key and stops an instance, each as the daemon then says', async () => {
    await cliJson(['instances', 'add', 'gpu-2', '--model', MODEL, '--endpoint', sim.url], home);
    const ready = await cliJson<{ defaultKey: { id: string; secret: string } }>(['instances', 'ready', 'gpu-2'], home);
    const old = ready.defaultKey;
    const main = startConsole(home);
    await main.waitFor((s) => s.includes('● live') && s.includes('gpu-2'), 'the console with gpu-2');
    main.write('j');
    await main.waitFor('› gpu-2', 'gpu-2 selected');

    // e: the pack's end, read as --pack-ends reads it.
    main.write('e');
    await main.waitFor('Pack ends:', 'the pack prompt');
    main.write('+30d');
    await main.waitFor('Pack ends: +30d', 'the typed end');
    main.write(KEY.enter);
    // Said twice, by the console and by the daemon's event: either line will do.
    await main.waitFor(/Pack of gpu-2 (now ends|extended to)/, 'the extension');
    const extended = await cliJson<{ packEndsAt: string; activeKeys: number }>(['instances', 'show', 'gpu-2'], home);
    const days = (Date.parse(extended.packEndsAt) - Date.now()) / 86_400_000;
    expect(days > 29.9 && days <= 30).toBe(true);
    expect(extended.activeKeys).toBe(1);

    // o on its default key, no grace: the CLI's question, the new secret once; the old one is refused.
    main.write(KEY.enter);
    await main.waitFor('› default', 'the Keys pane of gpu-2');
    main.write('o');
    await main.waitFor('Grace:', 'the grace prompt');
    main.write(KEY.enter);
    await main.waitFor('y rotate', 'the question');
    main.write('y');
    const box = await main.waitFor(SECRET, 'the new secret on screen');
    const fresh = SECRET.exec(box)![0];
    expect(fresh).not.toBe(old.secret);
    main.write(KEY.enter);
    await main.waitFor(
      /default +ob_sk_…\w{4} +revoked[\s\S]*› default +ob_sk_…\w{4} +active/,
      'the old key revoked, the new one active',
    );
    expect(main.everything()).not.toContain(fresh);
    const refused = await sdk(old.secret)
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello' }] })
      .catch((e: unknown) => e);
    expect([(refused as APIError).status, (refused as APIError).code]).toEqual([401, 'revoked_api_key']);
    const reply = await sdk(fresh).chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Hi' }],
    });
    expect(reply.choices[0]!.finish_reason).toBe('stop');

    // s on the Instances pane: asked first, then stopped; the daemon refuses its keys.
    main.write('q');
    await main.waitFor('› gpu-2', 'back on the Instances pane');
    main.write('s');
    await main.waitFor('Stop instance gpu-2 (gemma4:26b) and revoke its 1 active key', 'the question');
    main.write('y');
    await main.waitFor('gpu-2 is now stopped', 'the stop');
    const shown = await cliJson<{ state: string; activeKeys: number }>(['instances', 'show', 'gpu-2'], home);
    expect([shown.state, shown.activeKeys]).toEqual(['stopped', 0]);
    const after = await sdk(fresh)
      .chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello' }] })
      .catch((e: unknown) => e);
    expect((after as APIError).status).toBe(401);
    main.write('q');
    expect(await main.exited).toBe(0);
  });

  it('says the daemon is not running, without a stack, and connects when it starts', async () => {
    const other = await tmpHome();
    const term = startConsole(other);
    const down = await term.waitFor('not reachable', 'the message');
    expect(down).toContain('● daemon unreachable');
    expect(down.replace(/\s+/g, ' ')).toContain(`Cannot reach the ob-proxy daemon at ${join(other, 'ob-proxy.sock')}`);
    expect(down).not.toMatch(/^\s+at /m);
    const late = await startServe(other);
    try {
      const up = await term.waitFor(`ob-proxy console · ${late.baseUrl} · ● live`, 'the reconnection');
      expect(up).toContain('No instances yet.');
    } finally {
      term.write('q');
      await late.stop();
    }
  });
});
