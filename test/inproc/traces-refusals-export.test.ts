/**
 * OpenTelemetry traces (docs/operations.md#traces), in process, of what is not a model's answer:
 * a span for each refusal with its error code and the key's ids once the key is known, none for
 * a model listing; what the test collector (test/helpers/traced-daemon.ts) receives, never a
 * secret or a message; a collector that refuses spans, logged once and again when it is back;
 * one that never answers, holding no request and no shutdown past its bound.
 */
import { type Socket, createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { OtlpReceiver, ReceivedSpan } from '../helpers/otlp-receiver.js';
import { type Inproc, MODEL, buildInproc } from '../helpers/inproc.js';
import { CLIENT, ERROR, type TracedDaemon, hello, startTracedDaemon } from '../helpers/traced-daemon.js';

let t: TracedDaemon;
let d: Inproc;
let simUrl: string;
let collector: OtlpReceiver;
let secrets: Record<string, string>;
let keyIds: Record<string, string>;

const newSpans = (): Promise<ReceivedSpan[]> => t.newSpans();

beforeAll(async () => {
  t = await startTracedDaemon();
  ({ d, simUrl, collector, secrets, keyIds } = t);
});

afterAll(async () => {
  await t?.close();
});

describe('refusals get spans, with their error code', () => {
  const refusal = (status: number, code: string, ids: Record<string, string> = {}): Record<string, unknown> => ({
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'openai',
    'http.response.status_code': status,
    'error.type': code,
    ...ids,
  });

  type Case = readonly [string, () => string | null, number, string, () => Record<string, string>];
  it.each<Case>([
    ['no key (400)', () => null, 400, 'missing_api_key', () => ({})],
    ['an unknown key (401)', () => 'ob_sk_not-a-key-at-all', 401, 'invalid_api_key', () => ({})],
    [
      'a revoked key (401): the key is known, its ids are set',
      () => secrets.revoked!,
      401,
      'revoked_api_key',
      () => ({ 'ob_proxy.key.id': keyIds.revoked!, 'ob_proxy.instance.id': 'revoked' }),
    ],
    [
      'a deployment not ready (409)',
      () => secrets.pending!,
      409,
      'deployment_not_ready',
      () => ({ 'ob_proxy.key.id': keyIds.pending!, 'ob_proxy.instance.id': 'pending' }),
    ],
    [
      'a body that is not JSON (400), after the key passed',
      () => secrets.live!,
      400,
      'invalid_json',
      () => ({ 'ob_proxy.key.id': keyIds.live!, 'ob_proxy.instance.id': 'live' }),
    ],
  ])('%s', async (_name, key, status, code, ids) => {
    const r = await d.chat(key(), code === 'invalid_json' ? '{"model":' : hello());
    expect(r.status).toBe(status);
    expect((r.json as { error: { code: string } }).error.code).toBe(code);
    const [span, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(span).toMatchObject({ name: 'chat', kind: CLIENT, status: { code: ERROR, message: code } });
    expect(span!.attributes).toEqual(refusal(status, code, ids()));
  });

  it("a key over its rpm (429): the first request's span, then the refusal's", async () => {
    expect((await d.chat(secrets.limited!, hello())).status).toBe(200);
    const r = await d.chat(secrets.limited!, hello());
    expect(r.status).toBe(429);
    const [ok, refused, ...more] = await newSpans();
    expect(more).toEqual([]);
    expect(ok!.attributes['http.response.status_code']).toBe(200);
    expect(refused!.attributes).toEqual(
      refusal(429, 'rate_limited', { 'ob_proxy.key.id': keyIds.limited!, 'ob_proxy.instance.id': 'live' }),
    );
  });

  it('a model listing is no GenAI operation: no span', async () => {
    const r = await d.daemon.dataPlane.inject({
      method: 'GET',
      url: '/v1/models',
      headers: { authorization: `Bearer ${secrets.live!}` },
    });
    expect(r.statusCode).toBe(200);
    const bad = await d.daemon.dataPlane.inject({ method: 'GET', url: '/v1/models' });
    expect(bad.statusCode).toBe(400);
    expect(await newSpans()).toEqual([]);
  });
});

describe('what the collector receives, and what it does not', () => {
  it('no secret anywhere in what was exported, nor a message', () => {
    const all = Buffer.concat(collector.raw).toString('utf8');
    expect(all.length).toBeGreaterThan(1000);
    for (const [name, secret] of Object.entries(secrets)) {
      expect(all.includes(secret), name).toBe(false);
      // Nor its random part alone (the secret without its prefix and id).
      expect(all.includes(secret.slice(-20)), `${name}'s tail`).toBe(false);
    }
    expect(all).not.toContain('Hello there');
    expect(new Set(collector.paths)).toEqual(new Set(['/v1/traces']));
    expect(new Set(collector.contentTypes)).toEqual(new Set(['application/json']));
  });

  it('a collector that refuses spans: requests are answered, the log says so once, and again when it is back', async () => {
    // 400: refused for good, not retried (a 503 is retried with back-off, for seconds).
    collector.failWith = 400;
    const warnings = (): unknown[] => d.logs.filter((l) => String(l.msg).startsWith('the trace collector'));
    const had = warnings().length;
    for (let i = 0; i < 2; i++) {
      expect((await d.chat(secrets.live!, hello())).status).toBe(200);
      await expect(d.daemon.ctx.tracing!.flush()).rejects.toThrow();
    }
    expect(warnings().slice(had)).toMatchObject([
      {
        level: 40,
        collector: `${collector.url}/v1/traces`,
        msg: 'the trace collector did not take spans: they are dropped until it does (requests are not affected)',
      },
    ]);
    collector.failWith = null;
    expect((await d.chat(secrets.live!, hello())).status).toBe(200);
    await newSpans();
    expect(warnings().slice(had + 1)).toMatchObject([{ level: 30, msg: 'the trace collector takes spans again' }]);
  });
});

describe('a collector that takes connections and never answers', () => {
  it('holds no request, and no shutdown past its bound (an export waits up to 10 s)', async () => {
    const sockets: Socket[] = [];
    const silent = createServer((s) => sockets.push(s));
    await new Promise<void>((done) => silent.listen(0, '127.0.0.1', done));
    const port = (silent.address() as { port: number }).port;
    const hung = await buildInproc({ otlp: { url: `http://127.0.0.1:${port}/v1/traces`, serviceName: 'x' } });
    try {
      expect((await hung.manage('POST', '/v1/instances', { id: 'a', model: MODEL, endpoint: simUrl })).status).toBe(
        201,
      );
      const ready = await hung.manage('POST', '/v1/instances/a/ready', {});
      const secret = (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
      for (let i = 0; i < 3; i++) expect((await hung.chat(secret, hello({ stream: i === 1 }))).status).toBe(200);
      void hung.daemon.ctx.tracing!.flush().catch(() => {});
      // shutdown(0): the spans get their 1 s, then the daemon stops, the export still unanswered.
      await hung.close();
      expect(sockets.length).toBeGreaterThan(0);
    } finally {
      for (const s of sockets) s.destroy();
      await new Promise((done) => silent.close(done));
    }
  });
});
