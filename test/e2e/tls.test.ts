/**
 * HTTPS on the public listener (docs/contract.md §5): `serve --tls-cert --tls-key`, called with
 * the openai SDK trusting a certificate made here with openssl; the pair replaced and SIGHUP sent
 * while a stream is open: new connections get the new certificate, the open stream ends whole.
 * A pair that cannot serve stops the start-up with one line, and at a reload is logged while the
 * previous certificate stays.
 */
import { execFile } from 'node:child_process';
import { copyFile, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import OpenAI from 'openai';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readyInstance } from '../helpers/store-home.js';
import { type Pair, makePair, servedFingerprint } from '../helpers/tls-pair.js';
import {
  BIN,
  NODE,
  type ServeProcess,
  type SimProcess,
  eventually,
  startServe,
  startSimulate,
  tmpHome,
} from '../helpers/processes.js';

const MODEL = 'gemma4:26b';

/** The openai SDK whose connections trust the CAs of `agent` (as NODE_EXTRA_CA_CERTS would). */
function sdk(baseUrl: string, apiKey: string, agent: Agent): OpenAI {
  const viaAgent = (input: string | URL | Request, init?: RequestInit): Promise<Response> =>
    undiciFetch(
      input as string,
      { ...(init as object), dispatcher: agent } as Parameters<typeof undiciFetch>[1],
    ) as unknown as Promise<Response>;
  return new OpenAI({ baseURL: `${baseUrl}/v1`, apiKey, fetch: viaAgent, maxRetries: 0 });
}

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      NODE,
      [BIN, ...args],
      { env: { ...process.env, NO_COLOR: '1' }, timeout: 10_000, killSignal: 'SIGKILL' },
      (err, stdout, stderr) => {
        const e = err as (Error & { code?: number | string }) | null;
        resolve({ code: e === null ? 0 : typeof e.code === 'number' ? e.code : null, stdout, stderr });
      },
    );
  });
}

let dir: string;
let a: Pair;
let b: Pair;
beforeAll(async () => {
  dir = await tmpHome();
  a = makePair(dir, 'a');
  b = makePair(dir, 'b');
});

describe('serve over HTTPS', () => {
  let serve: ServeProcess;
  let sim: SimProcess;
  let agent: Agent;
  afterAll(async () => {
    await serve?.stop();
    await sim?.stop();
    await agent?.close();
  });

  it('serves the SDK over HTTPS, and a SIGHUP serves the new pair to new connections while an open stream completes', async () => {
    const live = { cert: join(dir, 'live.crt'), key: join(dir, 'live.key') };
    await copyFile(a.cert, live.cert);
    await copyFile(a.key, live.key);
    // Slow enough that the stream is still open when the reload is seen (12 tokens, 4 a second).
    sim = await startSimulate([MODEL], ['--tokens-per-second', '4', '--chunks', '12']);
    serve = await startServe(await tmpHome(), ['--tls-cert', live.cert, '--tls-key', live.key]);
    expect(serve.baseUrl).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const { secret } = await readyInstance(serve.home, 'gpu-1', sim.url);

    // The client trusts both certificates: which one it is given is checked on its own below.
    agent = new Agent({ connect: { ca: [a.pem, b.pem] } });
    const client = sdk(serve.baseUrl, secret, agent);
    expect(await servedFingerprint(serve.baseUrl, [a.pem])).toBe(a.fingerprint);

    const stream = await client.chat.completions.create({
      model: MODEL,
      stream: true,
      messages: [{ role: 'user', content: 'Count' }],
    });
    const it = stream[Symbol.asyncIterator]();
    let text = '';
    const first = await it.next();
    text += (first.value as OpenAI.ChatCompletionChunk).choices[0]?.delta?.content ?? '';

    await copyFile(b.cert, live.cert);
    await copyFile(b.key, live.key);
    serve.proc.kill('SIGHUP');
    await eventually(
      async () => (await servedFingerprint(serve.baseUrl, [b.pem])) === b.fingerprint,
      'the new certificate served',
      10_000,
    );
    // The daemon logs the reload after the new pair is in place: its line can still be in the pipe.
    const reloaded = (): Record<string, unknown>[] =>
      serve.logs().filter((l) => l.msg === 'TLS certificate reloaded: new connections get it, open ones keep theirs');
    await eventually(() => reloaded().length > 0, 'the reload logged');
    expect(reloaded()).toHaveLength(1);
    // The stream opened before the reload is still being sent now that the new pair is served.
    expect((await sim.requests()).at(-1)).toMatchObject({
      path: '/v1/chat/completions',
      completed: false,
      aborted: false,
    });

    for (let r = await it.next(); r.done !== true; r = await it.next())
      text += r.value.choices[0]?.delta?.content ?? '';
    // It ended whole, on the connection it was opened on.
    expect((await sim.requests()).filter((r) => r.path === '/v1/chat/completions').at(-1)).toMatchObject({
      completed: true,
      aborted: false,
    });
    expect(text).toBe(Array.from({ length: 12 }, (_, i) => `t${i} `).join(''));

    // A plain call on a new connection: served with the new certificate.
    const fresh = new Agent({ connect: { ca: [b.pem] } });
    const plain = sdk(serve.baseUrl, secret, fresh);
    const r = await plain.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: 'Hello' }] });
    expect(r.choices[0]!.message.content).toBe(text);
    await fresh.close();
  });

  it('a reload with a broken pair is logged and keeps the certificate served', async () => {
    const live = join(dir, 'live.crt');
    await writeFile(live, '-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n');
    serve.proc.kill('SIGHUP');
    const failed = await eventually(
      () => serve.logs().find((l) => l.msg === 'TLS reload failed: still serving the previous certificate'),
      'the reload failure logged',
    );
    expect(failed.err).toMatch(/^--tls-cert .*live\.crt and --tls-key .*live\.key cannot serve HTTPS: /);
    expect(await servedFingerprint(serve.baseUrl, [b.pem])).toBe(b.fingerprint);
    expect(serve.proc.exitCode).toBeNull();
  });
});

describe('a pair that cannot serve stops the start-up', () => {
  it("a key that is not the certificate's: exit 1, one line naming both flags, no socket left", async () => {
    const home = await tmpHome();
    const r = await run(['serve', '--home', home, '--port', '0', '--tls-cert', a.cert, '--tls-key', b.key]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(
      /^error: --tls-cert \S+a\.crt and --tls-key \S+b\.key cannot serve HTTPS: .*mismatch.*\n$/,
    );
    expect(await readdir(home)).toEqual([]);
  });

  it('a missing file: exit 1 naming the flag and the path', async () => {
    const r = await run([
      'serve',
      '--home',
      await tmpHome(),
      '--port',
      '0',
      '--tls-cert',
      join(dir, 'nope.crt'),
      '--tls-key',
      a.key,
    ]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/^error: Cannot read --tls-cert \S+nope\.crt \(ENOENT\): .*\n$/);
  });

  it('one flag without the other: usage error (exit 2) naming the missing flag', async () => {
    const r = await run(['serve', '--home', await tmpHome(), '--port', '0', '--tls-cert', a.cert]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe('error: --tls-cert and --tls-key go together: --tls-key (or OB_PROXY_TLS_KEY) is missing.\n');
  });
});

describe('SIGHUP without TLS', () => {
  it('is logged and changes nothing: the daemon keeps serving (systemctl reload must not stop it)', async () => {
    const serve = await startServe(await tmpHome());
    try {
      serve.proc.kill('SIGHUP');
      await eventually(
        () => serve.logs().some((l) => l.msg === 'SIGHUP: nothing to reload (no --tls-cert)'),
        'the SIGHUP logged',
      );
      expect((await fetch(`${serve.baseUrl}/healthz`)).status).toBe(200);
      expect(serve.proc.exitCode).toBeNull();
    } finally {
      expect(await serve.stop()).toBe(0);
    }
  });
});
