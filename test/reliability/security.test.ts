/**
 * Security: secrets never in logs, store, events, error messages or process
 * arguments; the management socket is private; the public port is only the data plane; bad
 * keys are slowed without touching valid keys; keys are compared through their hash only.
 */
import { createHash } from 'node:crypto';
import { chmod, mkdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { request as httpRequest } from 'node:http';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_PATTERN } from '../../src/domain/api-key.js';
import { obError } from '../../src/errors.js';
import { FileStore } from '../../src/store/file-store.js';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { Simulator } from '../../simulator/simulator.js';
import { cliJson, startServe, startSimulate, tmpHome as processHome } from '../helpers/processes.js';
import { type Harness, MODEL, chatBody, post, startHarness, startSim, tmpHome } from './harness.js';

let h: Harness;
let sim: Simulator;
let simUrl: string;
let client: DaemonClient;
const secrets: string[] = [];
const events: string[] = [];
let stopEvents: AbortController;

beforeAll(async () => {
  h = await startHarness({ badKeyLimit: 5 });
  const s = await startSim();
  sim = s.sim;
  simUrl = s.url;
  client = new DaemonClient(h.config.socket);
  stopEvents = new AbortController();
  void client.follow((e) => events.push(JSON.stringify(e)), stopEvents.signal);
});

afterAll(async () => {
  stopEvents.abort();
  await client.close();
  await h.stop();
  await sim.close();
});

function leaks(text: string): string[] {
  const found = secrets.filter((s) => text.includes(s));
  if (SECRET_PATTERN.test(text)) found.push(`pattern: ${SECRET_PATTERN.exec(text)?.[0] ?? ''}`);
  return found;
}

describe('secrets stay secret', () => {
  it('a full workload leaves no secret in logs, store, events or management answers', async () => {
    await client.addInstance({ id: 'sec', model: MODEL, endpoint: simUrl });
    const ready = await client.ready('sec', { wait: true });
    secrets.push(ready.defaultKey?.secret ?? '');
    const named = await client.createKey('sec', 'ci');
    secrets.push(named.secret);
    const [def, ci] = secrets as [string, string];
    // Traffic that makes the daemon log and answer errors, with secrets in odd places.
    expect((await post(h.baseUrl, def, chatBody('hi'))).status).toBe(200);
    expect((await post(h.baseUrl, ci, chatBody('hi', { stream: true }))).status).toBe(200);
    expect((await post(h.baseUrl, def, { model: ci, messages: [{ role: 'user', content: def }] })).status).toBe(400);
    expect((await post(h.baseUrl, `${def}x`, chatBody('hi'))).status).toBe(401);
    expect((await post(h.baseUrl, null, chatBody('hi'), { authorization: `Token ${def}` })).status).toBe(400);
    expect((await request(`${h.baseUrl}/v1/${ci}`, { headers: { authorization: `Bearer ${ci}` } })).statusCode).toBe(
      404,
    );
    expect((await post(h.baseUrl, def, chatBody('[[sim fail=http-error]]'))).status).toBe(500);
    await client.revokeKey(named.id);
    const revoked = await post(h.baseUrl, ci, chatBody('hi'));
    expect(revoked.json).toEqual(obError('revoked_api_key').toBody());
    await client.move('sec', 'stop');
    const afterStop = await post(h.baseUrl, def, chatBody('hi'));
    expect(afterStop.json).toEqual(obError('revoked_api_key').toBody());
    // A refused reveal, and every read route.
    const refused = await client.revealKey(ready.defaultKey?.id ?? '').then(
      () => new Error('revealed twice'),
      (e: unknown) => e as Error,
    );
    const answers = JSON.stringify([
      refused.message,
      await client.listKeys(),
      await client.listInstances(),
      await client.revocations(),
      await client.call('GET', '/v1/audit'),
      await client.status(),
    ]);
    await h.daemon.ctx.lifecycle.flushUsage(h.daemon.ctx.usage.takeDirty());
    // The store on disk: db.json and the journal of commits since it.
    const store = (await readFile(h.config.store, 'utf8')) + (await readFile(`${h.config.store}.journal`, 'utf8'));
    // The revocation journal holds both revoked keys, by id and hash: never a secret.
    const journal = (await readFile(`${h.config.store}.revocations`, 'utf8')).replace(/\0+$/, '');
    expect(journal.trim().split('\n')).toHaveLength(2);

    expect(events.length).toBeGreaterThan(5);
    expect(h.rawLogs.length).toBeGreaterThan(3);
    expect(leaks(h.rawLogs.join('\n'))).toEqual([]);
    expect(leaks(store)).toEqual([]);
    expect(leaks(journal)).toEqual([]);
    expect(journal).not.toMatch(SECRET_PATTERN);
    expect(leaks(events.join('\n'))).toEqual([]);
    expect(leaks(answers)).toEqual([]);
    // Keys are kept, and found, by their SHA-256 only.
    const reader = new FileStore(h.config.store, { readOnly: true });
    const stored = (await reader.load()).keys;
    await reader.close();
    expect(stored.map((k) => k.hash).sort()).toEqual(
      secrets.map((s) => createHash('sha256').update(s).digest('hex')).sort(),
    );
  });

  it('pino redacts an Authorization header wherever a log line carries one', () => {
    const secret = secrets[0] as string;
    h.daemon.ctx.log.info(
      {
        req: { headers: { authorization: `Bearer ${secret}` } },
        headers: { authorization: secret },
        authorization: secret,
        secret,
      },
      'redaction probe',
    );
    const line = h.logs.find((l) => l.msg === 'redaction probe');
    expect(line).toMatchObject({
      req: { headers: { authorization: '[redacted]' } },
      headers: { authorization: '[redacted]' },
      authorization: '[redacted]',
      secret: '[redacted]',
    });
    expect(leaks(h.rawLogs.join('\n'))).toEqual([]);
  });
});

describe('the management socket is private', () => {
  it('the socket file is mode 0600 in a 0700 home', async () => {
    expect((await stat(h.config.socket)).mode & 0o777).toBe(0o600);
    expect((await stat(h.home)).mode & 0o777).toBe(0o700);
  });

  it('the daemon refuses a socket directory other users can write', async () => {
    for (const mode of [0o777, 0o1777, 0o770, 0o720, 0o1770, 0o1730]) {
      const home = await tmpHome();
      const dir = join(home, 'shared');
      await mkdir(dir);
      await chmod(dir, mode);
      await expect(startHarness({ socket: join(dir, 'ob.sock') }, { home })).rejects.toThrow(
        /writable by (other users|everyone)/,
      );
    }
  });
});

describe('the public port is only the data plane', () => {
  const MANAGEMENT: [string, string][] = [
    ['GET', '/v1/status'],
    ['GET', '/v1/instances'],
    ['POST', '/v1/instances'],
    ['GET', '/v1/instances/sec'],
    ['DELETE', '/v1/instances/sec'],
    ...['ready', 'pending', 'stop', 'fail', 'terminate', 'extend'].map((a): [string, string] => [
      'POST',
      `/v1/instances/sec/${a}`,
    ]),
    ['GET', '/v1/keys'],
    ['POST', '/v1/keys'],
    ['POST', '/v1/keys/abc/revoke'],
    ['POST', '/v1/keys/abc/reveal'],
    ['GET', '/v1/revocations'],
    ['GET', '/v1/audit'],
    ['GET', '/v1/events'],
    ['GET', '/v1/store/backup'],
    ['POST', '/v1/keys/abc/limits'],
    ['GET', '/v1/usage'],
    ['GET', '/v1/stats'],
  ];

  it('every management route answers 404 on the public port, with or without a valid key', async () => {
    await client.addInstance({ id: 'pub', model: MODEL, endpoint: simUrl });
    const key = (await client.ready('pub', { wait: true })).defaultKey?.secret ?? '';
    secrets.push(key);
    const before = await client.listKeys();
    for (const [method, path] of MANAGEMENT) {
      // The list is the management plane's real routes.
      expect(
        h.daemon.management.hasRoute({ method: method as 'GET', url: path.replace(/\/(sec|abc)(\/|$)/, '/:id$2') }),
        `${method} ${path}`,
      ).toBe(true);
      for (const auth of [undefined, `Bearer ${key}`]) {
        const r = await request(`${h.baseUrl}${path}`, {
          method: method as 'GET',
          headers: { 'content-type': 'application/json', ...(auth === undefined ? {} : { authorization: auth }) },
          ...(method === 'POST'
            ? { body: JSON.stringify({ instance: 'pub', name: 'x', id: 'evil', model: MODEL }) }
            : {}),
        });
        const body = await r.body.json();
        expect({
          route: `${method} ${path}`,
          status: r.statusCode,
          code: (body as { error: { code: string } }).error.code,
        }).toEqual({ route: `${method} ${path}`, status: 404, code: 'route_not_found' });
      }
    }
    // Nothing changed behind them.
    expect(await client.listKeys()).toEqual(before);
    expect((await client.getInstance('pub')).state).toBe('ready');
  });
});

/** node:http can choose the source address (undici's connector does not pass localAddress on). */
function postFrom(
  localAddress: string,
  key: string,
  body: unknown,
): Promise<{ status: number; text: string; retryAfter: string | undefined }> {
  const text = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      `${h.baseUrl}/v1/chat/completions`,
      {
        method: 'POST',
        localAddress,
        agent: false,
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(text),
        },
      },
      (res) => {
        let out = '';
        res.setEncoding('utf8').on('data', (s: string) => {
          out += s;
        });
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, text: out, retryAfter: res.headers['retry-after'] }),
        );
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

describe('bad keys are slowed without touching valid keys', () => {
  it('after the limit an address gets 429 with retry-after for bad keys, while a valid key still works', async () => {
    await client.addInstance({ id: 'limit', model: MODEL, endpoint: simUrl });
    const key = (await client.ready('limit', { wait: true })).defaultKey?.secret ?? '';
    secrets.push(key);
    const bad = `${key.slice(0, -8)}AAAAAAAA`;
    // Each address is counted on its own: send from fresh loopback addresses.
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await postFrom('127.0.0.2', bad, chatBody('x'))).status);
    expect(statuses).toEqual([401, 401, 401, 401, 401, 429, 429, 429]);
    const limited = await postFrom('127.0.0.2', bad, chatBody('x'));
    expect(JSON.parse(limited.text)).toEqual(obError('rate_limited').toBody());
    expect(Number(limited.retryAfter)).toBeGreaterThan(0);
    // Another address is not limited by the guesser's strikes.
    expect((await postFrom('127.0.0.3', bad, chatBody('x'))).status).toBe(401);
    // A valid key from the limited address itself still goes through.
    const ok = await postFrom('127.0.0.2', key, chatBody('still me'));
    expect(ok.status).toBe(200);
    expect(sim.requests.some((r) => JSON.stringify(r.body).includes('still me'))).toBe(true);
  });
});

describe('a real serve process', () => {
  it('no secret in its arguments or environment; its socket is 0600', async () => {
    const home = await processHome();
    const up = await startSimulate([MODEL]);
    const serve = await startServe(home);
    try {
      await cliJson(['instances', 'add', 'p1', '--model', MODEL, '--endpoint', up.url], home);
      const ready = await cliJson<{ defaultKey: { secret: string } }>(['instances', 'ready', 'p1'], home);
      const created = await cliJson<{ secret: string }>(['keys', 'create', '--instance', 'p1', '--name', 'n'], home);
      expect(ready.defaultKey.secret).toMatch(SECRET_PATTERN);
      secrets.push(ready.defaultKey.secret, created.secret);
      const pid = serve.proc.pid as number;
      const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8');
      const environ = await readFile(`/proc/${pid}/environ`, 'utf8');
      expect(leaks(cmdline + environ)).toEqual([]);
      expect((await stat(join(home, 'ob-proxy.sock'))).mode & 0o777).toBe(0o600);
      expect(leaks(serve.lines.join('\n'))).toEqual([]);
      // The store is db.json and the journal of commits since it (where these keys are now).
      expect(leaks(await readFile(join(home, 'db.json'), 'utf8'))).toEqual([]);
      const journal = await readFile(join(home, 'db.json.journal'), 'utf8');
      expect(journal).toContain('"key.created"');
      expect(leaks(journal)).toEqual([]);
    } finally {
      expect(await serve.stop()).toBe(0);
      await up.stop();
    }
  });
});
