/**
 * A hostile or broken model server: statuses, broken HTTP, answers of another shape, echoed
 * credentials and usage it reports. One describe per defect found, its story above it.
 */
import { once } from 'node:events';
import { writeFile } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import { type AddressInfo, createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { Simulator } from '../../simulator/simulator.js';
import { obError } from '../../src/errors.js';
import { limitErrors } from '../../src/upstream/answer-limits.js';
import { upstreamStatusError } from '../../src/upstream/upstream-errors.js';
import {
  alongside,
  ask,
  errorEvents,
  expectUpstreamAborted,
  lastChatEnded,
  type RawUpstream,
  useHostilePair,
  startRawUpstream,
  useRawUpstreamDaemon,
} from '../helpers/hostile-upstream.js';
import { freshDatabase, type TestDatabase } from '../helpers/postgres.js';
import {
  chatBody,
  eventually,
  expectedTokens,
  freshAgent,
  type Harness,
  MODEL,
  post,
  readyInstance,
  sseFrames,
  startHarness,
  startSim,
  streamTokens,
} from '../reliability/harness.js';

/**
 * Regression (hostile model server): the stream relay aborted the upstream
 * request before settling the exchange, and undici calls the error callback within abort(),
 * which found the exchange still open and took the abort for a network failure:
 * - on an upstream error event, or an event refused (not JSON, not SSE, over the frame cap), the
 *   failure was told twice, the second time as `upstream_unavailable`: two counts in
 *   `ob_proxy_upstream_errors_total`, two "model server failed" lines;
 * - on a body kept open past the drain after `[DONE]` (1 s or 16 KiB), a stream the client had
 *   received whole was counted as an error of the key's usage (`ob-proxy usage`: errors 1) and as
 *   `upstream_unavailable`.
 * The exchange is now settled before the abort: one `upstream_error` per refused stream, and a
 * whole stream counts as one.
 */
describe('a stream received whole is a success however its upstream ends', () => {
  let h: Harness;
  let sim: Simulator;
  let key: string;
  beforeAll(async () => {
    h = await startHarness({ metricsPort: 0 });
    const s = await startSim({ chunks: 4 });
    sim = s.sim;
    key = await readyInstance(h, 'gpu-1', s.url);
  });
  afterAll(async () => {
    await h.stop();
    await sim.close();
  });

  /** `ob_proxy_upstream_errors_total` of gpu-1, by kind. */
  async function upstreamErrors(): Promise<Record<string, number>> {
    const text = await (await fetch(h.daemon.ctx.metricsUrl as string)).text();
    const out: Record<string, number> = {};
    for (const m of text.matchAll(/^ob_proxy_upstream_errors_total\{instance="gpu-1",kind="(\w+)"\} (\d+)$/gm))
      out[m[1]!] = Number(m[2]);
    return out;
  }

  const failures = (): unknown[] => h.logs.filter((l) => l.msg === 'model server failed').map((l) => l.code);

  it('an error event or a refused event is one upstream_error, in the log and the metrics', async () => {
    const modes = ['error-event', 'broken-error-event', 'named-error-event', 'named-event', 'html-frames'];
    for (const mode of modes) {
      const r = await post(h.baseUrl, key, chatBody(`go [[sim fail=${mode} failAfterChunks=2]]`, { stream: true }));
      expect({
        mode,
        status: r.status,
        errorEvents: errorEvents(r.text).length,
        done: r.text.includes('[DONE]'),
      }).toEqual({ mode, status: 200, errorEvents: 1, done: false });
    }
    // One failure per stream; the log line of each is written when its exchange ends.
    await eventually(() => failures().length >= modes.length, 'every failure logged');
    expect(failures()).toEqual(modes.map(() => 'upstream_error'));
    expect(await upstreamErrors()).toEqual({ upstream_error: modes.length });
  });

  it('a body kept open after [DONE] is aborted after the drain, and the whole stream counts as a success', async () => {
    const k = [...h.daemon.ctx.lifecycle.registry.keys.values()][0]!;
    const before = { ...k.usage };
    const logged = failures().length;
    const r = await post(h.baseUrl, key, chatBody('go [[sim fail=hang-after-done]]', { stream: true }));
    expect(r.status).toBe(200);
    expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(4));
    expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
    // The exchange is settled, whichever way, before the model server sees its connection closed.
    await expectUpstreamAborted(sim);
    expect({
      errors: k.usage.errors - before.errors,
      completion: k.usage.completionTokens - before.completionTokens,
    }).toEqual({
      errors: 0,
      completion: 4,
    });
    expect(failures().slice(logged)).toEqual([]);
    expect(await upstreamErrors()).toEqual({ upstream_error: 5 });
  });
});

/**
 * Regression: a status other than 200 or an error was relayed as it came: 204 and 304
 * reached the client with a Content-Length and no body, and a 201 carrying a whole completion
 * was turned into an "error" sent with status 201. Anything other than a 200 with a well-formed
 * answer, or an error status (4xx/5xx, passed on), is now 502 upstream_error, and the upstream
 * request is aborted (the simulator keeps those bodies open, so only an abort ends them).
 */
describe('an unexpected upstream status is 502 upstream_error', () => {
  const p = useHostilePair();

  it.each([201, 202, 206, 204, 304, 301, 302, 307])(
    'HTTP %i, plain and streaming: 502 upstream_error',
    async (status) => {
      for (const stream of [false, true]) {
        const r = await alongside(p, () => ask(p, `[[sim fail=bad-status status=${status}]]`, stream));
        expect({ stream, status: r.status, json: r.json }).toEqual({
          stream,
          status: 502,
          json: obError('upstream_error', {
            message: `The model server answered HTTP ${status}, which is not a chat completion; it was not relayed.`,
          }).toBody(),
        });
        if (status === 204 || status === 304) await lastChatEnded(p.hostile);
        else await expectUpstreamAborted(p.hostile);
      }
    },
  );
});

/**
 * Regression (hostile model server): an answer or an event that had to be
 * encoded again (its id not first, a usage chunk the client did not ask for, data on several
 * lines, a plain answer whose shape needed filling in) and nested a few thousand levels deep made
 * JSON.stringify overflow the stack. The RangeError, thrown inside undici's callback, was taken
 * for a network failure: the client got 502 (or an error event) `upstream_unavailable`, "could
 * not be reached or closed the connection. Retry", and the log and metrics blamed the network.
 * Such an answer is now refused for what it is: 502 `upstream_error` "nested too deeply to
 * relay" (one such event mid-stream, the upstream request aborted).
 */
describe('a deeply nested answer is refused as upstream_error', () => {
  const deep = `${'['.repeat(100_000)}${']'.repeat(100_000)}`;
  const content = `{"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`;
  const ev = (data: string): string => `data: ${data}\n\n`;

  /** The answers, by the request's content; each stream sends a content event first. */
  const ANSWERS: Record<string, string> = {
    plain: `{"object":"chat.completion","id":"up","created":1,"model":"${MODEL}","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"x":${deep}}`,
    idNotFirst:
      ev(content) + ev(`{"object":"chat.completion.chunk","id":"up","choices":[],"x":${deep}}`) + ev('[DONE]'),
    usageUnasked:
      ev(content) +
      ev(
        `{"id":"up","choices":[{"index":0,"delta":{"content":"!"}}],"usage":{"prompt_tokens":1,"completion_tokens":1},"x":${deep}}`,
      ) +
      ev('[DONE]'),
    multiLine: `${ev(content)}data: {"id":"up","choices":[],\ndata: "x":${deep}}\n\n${ev('[DONE]')}`,
    errorWithCr: `${ev(content)}data: {"error":{"message":"boom"},\r"x":${deep}}\n\n`,
  };

  const srv = useRawUpstreamDaemon(({ content: which }) => ({ body: ANSWERS[which] ?? '' }));

  /** The codes the daemon logged for the model server's failures so far. */
  const failureCodes = (): unknown[] => srv.h.logs.filter((l) => l.msg === 'model server failed').map((l) => l.code);

  it('a plain answer too deep to encode again: 502 upstream_error, said as such', async () => {
    const r = await post(srv.h.baseUrl, srv.key, chatBody('plain'));
    expect({ status: r.status, json: r.json }).toEqual({
      status: 502,
      json: obError('upstream_error', {
        message: "The model server's answer is nested too deeply to relay; it was not relayed.",
      }).toBody(),
    });
    expect(failureCodes().at(-1)).toBe('upstream_error');
  });

  it.each(['idNotFirst', 'usageUnasked', 'multiLine'])(
    'a stream event too deep to encode again (%s): one upstream_error event, no [DONE]',
    async (which) => {
      const before = failureCodes().length;
      const r = await post(srv.h.baseUrl, srv.key, chatBody(which, { stream: true }));
      expect(r.status).toBe(200);
      const frames = sseFrames(r.text);
      expect(frames).toEqual([
        `data: ${content.replace('"id":"up"', `"id":"${(JSON.parse(frames[0]!.slice(6)) as { id: string }).id}"`)}`,
        `data: ${JSON.stringify(
          obError('upstream_error', {
            message: 'The model server sent an event nested too deeply to relay; the stream was ended.',
          }).toBody(),
        )}`,
      ]);
      await eventually(() => failureCodes().length > before, 'the failure logged');
      expect(failureCodes().slice(before)).toEqual(['upstream_error']);
    },
  );

  it('an error event too deep to encode again: our error event with its message, the rest dropped', async () => {
    const before = failureCodes().length;
    const r = await post(srv.h.baseUrl, srv.key, chatBody('errorWithCr', { stream: true }));
    expect(r.status).toBe(200);
    const frames = sseFrames(r.text);
    expect(frames).toEqual([
      `data: ${content.replace('"id":"up"', `"id":"${(JSON.parse(frames[0]!.slice(6)) as { id: string }).id}"`)}`,
      `data: ${JSON.stringify(obError('upstream_error', { message: 'Model server error: boom' }).toBody())}`,
    ]);
    await eventually(() => failureCodes().length > before, 'the failure logged');
    expect(failureCodes().slice(before)).toEqual(['upstream_error']);
  });
});

/**
 * Regression (hostile model server): an informational response before the
 * answer (103 Early Hints, as a reverse proxy in front of a model server may send; 102
 * Processing) was refused as the answer itself: 502 "The model server answered HTTP 103, which is
 * not a chat completion", and the valid answer behind it was lost. (docs/reliability.md said Node's
 * client waits for the final status; undici hands over every 1xx but 100.) Informational
 * responses are now skipped and the final one relayed; one that never ends meets the response
 * deadline, as any answer does.
 */
describe('informational statuses are skipped and the final answer relayed', () => {
  const PLAIN = `{"id":"up","object":"chat.completion","created":1,"model":"${MODEL}","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}`;
  const STREAM = `data: {"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n`;
  const DEADLINE_MS = 1_500;

  /** 102 Processing every 50 ms until the connection closes; never a final status. */
  function processingForEver(res: ServerResponse): false {
    const timer = setInterval(() => res.writeProcessing(), 50);
    res.on('close', () => {
      clearInterval(timer);
      endlessClosed = true;
    });
    return false;
  }
  let endlessClosed = false;

  const early: Record<string, (res: ServerResponse) => boolean | undefined> = {
    hints: (res) => {
      res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
      return undefined;
    },
    processing: (res) => {
      res.writeProcessing();
      res.writeEarlyHints({ link: '</a.js>; rel=preload; as=script' });
      return undefined;
    },
    endless: processingForEver,
  };

  const srv = useRawUpstreamDaemon(
    ({ stream, content }) => ({
      body: stream ? STREAM : PLAIN,
      ...(early[content] === undefined ? {} : { before: early[content] }),
    }),
    { responseDeadlineMs: DEADLINE_MS },
  );

  it.each(['hints', 'processing'])(
    '%s before the answer: the answer is relayed, plain and streaming',
    async (which) => {
      const plain = await post(srv.h.baseUrl, srv.key, chatBody(which));
      expect(plain.status).toBe(200);
      expect(plain.text).toBe(PLAIN.replace('"id":"up"', `"id":"${(plain.json as { id: string }).id}"`));
      const stream = await post(srv.h.baseUrl, srv.key, chatBody(which, { stream: true }));
      expect(stream.status).toBe(200);
      const id = (JSON.parse(sseFrames(stream.text)[0]!.slice(6)) as { id: string }).id;
      expect(stream.text).toBe(STREAM.replace('"id":"up"', `"id":"${id}"`));
    },
  );

  it('informational responses without end: 502 at the response deadline, the upstream request aborted', async () => {
    const r = await post(srv.h.baseUrl, srv.key, chatBody('endless'));
    expect({ status: r.status, json: r.json }).toEqual({
      status: 502,
      json: limitErrors.tooSlow(DEADLINE_MS).toBody(),
    });
    await eventually(() => endlessClosed, 'the model server saw its connection closed');
  });
});

/**
 * Regression (a broken model server): a model server that answered in broken HTTP
 * (response headers over undici's 16 KiB, a chunk size that is not hex) was reported to the client as 502 upstream_unavailable, "could not be reached
 * or closed the connection. Retry": the SDKs retry that, and the operator looks at the network.
 * Now it is 502 upstream_error naming what was wrong, as for any answer the proxy refuses.
 */
describe('malformed upstream HTTP is 502 upstream_error naming what was wrong', () => {
  const MODELS = JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model' }] });

  /** What the raw server writes for the next chat completion. */
  let next = '';
  let server: Server;
  let h: Harness;
  let key: string;

  beforeAll(async () => {
    server = createServer((socket: Socket) => {
      let head = '';
      socket.on('error', () => {});
      socket.on('data', (d: Buffer) => {
        head += d.toString('latin1');
        if (!head.includes('\r\n\r\n')) return;
        if (head.startsWith('GET ')) {
          socket.end(
            `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${MODELS.length}\r\nconnection: close\r\n\r\n${MODELS}`,
          );
        } else if (head.includes('"messages"')) {
          socket.end(next);
        }
      });
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    h = await startHarness({ upstreamTimeoutMs: 5_000, idleTimeoutMs: 5_000 });
    key = await readyInstance(h, 'gpu-1', `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  afterAll(async () => {
    await h.stop();
    server.close();
  });

  const malformed = (what: string) =>
    obError('upstream_error', {
      message: `The model server sent a malformed HTTP response (${what}); it was not relayed. Check the instance's endpoint.`,
    }).toBody();

  async function askWith(answer: string): Promise<{ status: number; json: unknown }> {
    next = answer;
    const agent = freshAgent();
    try {
      const r = await post(h.baseUrl, key, chatBody('hi'), {}, agent);
      return { status: r.status, json: r.json };
    } finally {
      await agent.close();
    }
  }

  it('response headers over 16 KiB: 502 upstream_error, not "could not be reached"', async () => {
    const r = await askWith(`HTTP/1.1 200 OK\r\nx-junk: ${'a'.repeat(20_000)}\r\ncontent-length: 2\r\n\r\n{}`);
    expect(r).toEqual({ status: 502, json: malformed('headers over 16 KiB') });
  });

  it('a chunk size that is not hex: 502 upstream_error', async () => {
    const r = await askWith(
      'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n',
    );
    expect(r).toEqual({ status: 502, json: malformed('not valid HTTP/1.1') });
  });
});

/**
 * Regression (hostile model server): a plain chat answer that was not a chat completion (JSON
 * of another shape) was refused with 502 but not counted as the model server's failure: no
 * "model server failed" log line, no `ob_proxy_upstream_errors_total`, no error on the trace,
 * where the same answer on /v1/responses, /v1/completions or /v1/messages was. Every route now
 * refuses it through one path, and says it as the model server's failure.
 */
describe("a shapeless chat answer is the model server's failure", () => {
  let h: Harness;
  let up: RawUpstream;
  let key: string;
  beforeAll(async () => {
    // JSON, and an object, but of no API's shape.
    up = await startRawUpstream(() => ({ body: '{"hello":"world"}' }));
    h = await startHarness();
    key = await readyInstance(h, 'gpu-1', up.url);
  });
  afterAll(async () => {
    await h.stop();
    await up.close();
  });

  const failures = (): number => h.logs.filter((l) => l.msg === 'model server failed').length;

  it.each([
    ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }] }, 'a chat completion'],
    ['/v1/responses', { input: 'hi' }, 'a Responses API response'],
    ['/v1/completions', { prompt: 'hi' }, 'a text completion'],
    ['/v1/messages', { max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] }, 'a Messages API message'],
  ] as const)(
    '%s: 502 upstream_error naming what was expected, and the model server failed',
    async (path, body, what) => {
      const before = failures();
      const answered = up.answered;
      const res = await request(`${h.baseUrl}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
        body: JSON.stringify({ model: MODEL, ...body }),
      });
      const json = (await res.body.json()) as Record<string, unknown>;
      expect(up.answered).toBe(answered + 1);
      const message = `The model server sent an answer that is not ${what}. Check the instance's endpoint.`;
      // Messages speaks Anthropic's error shape; the others OpenAI's.
      expect({ status: res.statusCode, json }).toEqual({
        status: 502,
        json:
          path === '/v1/messages'
            ? { type: 'error', error: { type: 'api_error', message, code: 'upstream_error' } }
            : obError('upstream_error', { message }).toBody(),
      });
      expect(failures()).toBe(before + 1);
      expect(h.logs.filter((l) => l.msg === 'model server failed').at(-1)).toMatchObject({ code: 'upstream_error' });
    },
  );
});

/**
 * Regression (hostile model server): a model server, or a gateway in front
 * of it, that echoes the request's `Authorization` header in an error ("invalid token: Bearer
 * sk-…") handed the operator's upstream token (`--upstream-token-file`) to the client: an error
 * status's message and code are passed on, and an error event is forwarded as sent. Any client
 * of the instance, a key revoked since included, could then call the model server directly. The
 * token is now cleared from what is passed on from an error: the message, the code, the event
 * (its data on one line or several, the token escaped or not), and our own event for `event:
 * error`; a plain-text body is cleared before it is cut to 500 characters.
 */
describe('the upstream token never reaches the client', () => {
  const TOKEN = 'sk-operator-Up/stream+token=42';
  const content = `{"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}`;
  const ev = (data: string): string => `data: ${data}\n\n`;

  /** Each answer echoes the Authorization header the model server received. */
  const ANSWERS: Record<string, (auth: string) => { status?: number; body: string }> = {
    status: (auth) => ({
      status: 401,
      body: JSON.stringify({ error: { message: `invalid token in header ${auth}`, code: `bad:${auth}` } }),
    }),
    statusText: (auth) => ({ status: 403, body: `forbidden: ${auth}` }),
    event: (auth) => ({ body: ev(content) + ev(JSON.stringify({ error: { message: `unauthorized: ${auth}` } })) }),
    escaped: (auth) => ({
      body: ev(content) + ev(`{"error":{"message":"unauthorized: ${auth.replaceAll('/', '\\/')}"}}`),
    }),
    multiLine: (auth) => ({
      body: `${ev(content)}event: error\ndata: {"error":{"message":\ndata: "unauthorized: ${auth}"}}\n\n`,
    }),
    named: (auth) => ({ body: `${ev(content)}event: error\ndata: {"message":"unauthorized: ${auth}","code":"x"}\n\n` }),
  };

  let h: Harness;
  let up: RawUpstream;
  let key: string;
  const received: string[] = [];
  beforeAll(async () => {
    up = await startRawUpstream(({ stream, content: which, headers }) => {
      const auth = String(headers.authorization);
      received.push(auth);
      const a = (ANSWERS[which] as (auth: string) => { status?: number; body: string })(auth);
      return {
        status: a.status ?? 200,
        headers: {
          'content-type':
            a.status === undefined
              ? stream
                ? 'text/event-stream'
                : 'application/json'
              : which === 'statusText'
                ? 'text/plain'
                : 'application/json',
        },
        body: a.body,
      };
    });
    h = await startHarness();
    const tokenFile = join(h.home, 'upstream.token');
    await writeFile(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
    const lc = h.daemon.ctx.lifecycle;
    await h.daemon.ctx.upstreamTokens.prepare(tokenFile);
    await lc.addInstance({ id: 'gpu-1', model: MODEL, endpoint: up.url, upstreamTokenFile: tokenFile });
    const { defaultKey } = await lc.ready('gpu-1');
    const k = await defaultKey;
    key = lc.claimSecret(k!.id) as string;
    await eventually(() => h.daemon.ctx.upstreamTokens.get('gpu-1') === TOKEN, 'the upstream token loaded');
  });
  afterAll(async () => {
    await h.stop();
    await up.close();
  });

  it('an error status that echoes the token: passed on without it', async () => {
    const r = await post(h.baseUrl, key, chatBody('status'));
    expect(received.at(-1)).toBe(`Bearer ${TOKEN}`);
    expect({ status: r.status, json: r.json }).toEqual({
      status: 401,
      json: obError('upstream_error', {
        status: 401,
        wireCode: 'bad:Bearer [upstream token]',
        message: 'Model server error (HTTP 401): invalid token in header Bearer [upstream token]',
      }).toBody(),
    });
    const text = await post(h.baseUrl, key, chatBody('statusText'));
    expect({ status: text.status, message: (text.json as { error: { message: string } }).error.message }).toEqual({
      status: 403,
      message: 'Model server error (HTTP 403): forbidden: Bearer [upstream token]',
    });
  });

  it.each(['event', 'escaped', 'multiLine'])(
    'an error event that echoes the token (%s): our error event, without it',
    async (which) => {
      const r = await post(h.baseUrl, key, chatBody(which, { stream: true }));
      expect(r.status).toBe(200);
      expect(r.text).not.toContain('operator');
      expect(
        r.text.endsWith(
          `data: ${JSON.stringify(
            obError('upstream_error', {
              message: 'Model server error: unauthorized: Bearer [upstream token]',
            }).toBody(),
          )}\n\n`,
        ),
      ).toBe(true);
    },
  );

  it('event: error without an error member: our event, without the token', async () => {
    const r = await post(h.baseUrl, key, chatBody('named', { stream: true }));
    expect(r.text).not.toContain('operator');
    expect(
      r.text.endsWith(
        `data: ${JSON.stringify(
          obError('upstream_error', {
            message: 'Model server error: unauthorized: Bearer [upstream token]',
            wireCode: 'x',
          }).toBody(),
        )}\n\n`,
      ),
    ).toBe(true);
  });

  it('a plain-text error body cut at 500 characters never keeps part of the token', () => {
    const e = upstreamStatusError(500, 'text/plain', `${'x'.repeat(490)}Bearer ${TOKEN}`, TOKEN);
    expect(e.message).toBe(`Model server error (HTTP 500): ${'x'.repeat(490)}Bearer [up`);
  });
});

/**
 * Regression (hostile model server): the token counts a model server reports
 * were trusted. A plain answer's usage was kept when it was any finite number ≥ 0 (a fraction, or
 * 1e308, which two answers turn into Infinity); a stream's usage chunk was kept as it came, so a
 * string ("100"), a negative number or 1e308 went into the key's counters (string concatenation:
 * `0` + `"100"` is `"0100"`), its tokens-per-minute window (a string there blocked or freed the
 * key at random; a negative prompt count credited its budget), the metrics and `ob-proxy usage`.
 * The next flush wrote `"0100"`, `null` (Infinity) or `0.5` into db.json, and the daemon then
 * refused to start on its own store (store validation); on PostgreSQL the flush failed for ever
 * (NOT NULL / bigint), taking every other key's counts of that daemon with it.
 * Now one function (safeTokenCount) turns a reported count into a token count: a whole number
 * from 0 to MAX_EXCHANGE_TOKENS, anything else is "not reported" (a plain answer's completion
 * counts 0, a stream's its content events, as when the usage chunk is absent; the prompt is
 * charged its estimate, prompt-estimate.ts).
 */
describe('upstream usage is checked before it is counted', () => {
  /** Usage texts a model server may send, each written as raw JSON (so 1e308 stays 1e308). */
  const HOSTILE = [
    '{"prompt_tokens":1e308,"completion_tokens":1e308,"total_tokens":1e308}',
    '{"prompt_tokens":0.5,"completion_tokens":2.25}',
    '{"prompt_tokens":"100","completion_tokens":"5"}',
    '{"prompt_tokens":-1000,"completion_tokens":-7}',
    '{"prompt_tokens":9007199254740991,"completion_tokens":9007199254740991}',
    '{"prompt_tokens":3,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":1e308}}',
    '{"prompt_tokens":null,"completion_tokens":[1],"completion_tokens_details":{"reasoning_tokens":-1}}',
  ];
  const SANE = '{"prompt_tokens":3,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":1}}';

  /**
   * A model server that answers every chat with one content token and the usage text named by the
   * request's last message (`usage:<json>`), plainly or as a stream (a content event, a usage
   * chunk, [DONE]).
   */
  function usageServer(): Promise<RawUpstream> {
    return startRawUpstream(({ stream, content }) => {
      const usage = content.slice('usage:'.length);
      const body = stream
        ? `data: {"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}\n\n` +
          `data: {"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[],"usage":${usage}}\n\n` +
          'data: [DONE]\n\n'
        : `{"id":"up","object":"chat.completion","created":1,"model":"${MODEL}","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":${usage}}`;
      return { body };
    });
  }

  interface Counts {
    requests: number;
    promptTokens: number;
    completionTokens: number;
    reasoningTokens: number;
    errors: number;
    disconnects: number;
  }

  async function keyUsage(h: Harness): Promise<Counts> {
    const report = await new DaemonClient(h.config.socket).usage({});
    const row = report.packs[0]?.keys[0];
    if (row === undefined) throw new Error('no key in the usage report');
    const { requests, promptTokens, completionTokens, reasoningTokens, errors, disconnects } = row;
    return { requests, promptTokens, completionTokens, reasoningTokens, errors, disconnects };
  }

  let cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of cleanup.reverse()) await c();
    cleanup = [];
  });

  describe.each([
    ['lowdb', false],
    ['PostgreSQL', true],
  ] as const)('%s store', (_name, onPostgres) => {
    it('hostile usage counts as not reported, in plain answers and streams; the daemon starts again on its store', async () => {
      const up = await usageServer();
      cleanup.push(() => up.close());
      const db: TestDatabase | null = onPostgres ? await freshDatabase() : null;
      if (db !== null) cleanup.push(() => db.drop());
      const storePatch = db === null ? {} : { store: db.url };
      let h = await startHarness(storePatch);
      let running = true;
      cleanup.push(async () => {
        if (running) await h.stop();
      });
      const secret = await readyInstance(h, 'gpu-1', up.url);
      const keyId = [...h.daemon.ctx.lifecycle.registry.keys.values()][0]!.id;
      // A tpm limit on a shared store gives a daemon just started no share for a few periods: the
      // window is checked on lowdb, where it is this daemon's alone.
      if (!onPostgres) await h.daemon.ctx.lifecycle.setKeyLimits(keyId, { tpm: 1000 });

      for (const usage of [...HOSTILE, SANE]) {
        for (const stream of [false, true]) {
          const r = await post(h.baseUrl, secret, chatBody(`usage:${usage}`, { stream }));
          expect({ usage, stream, status: r.status }).toEqual({ usage, stream, status: 200 });
        }
      }
      // Counted per exchange: a sane usage as reported; a hostile one as not reported: the prompt
      // then charged its estimate (a quarter of the request's length: prompt-estimate.ts; a stream
      // goes up with the 40 characters of the usage option spliced in), the completion 0 in a plain
      // answer and its one content event in a stream. The sixth hostile text has sane prompt and
      // completion counts: only its reasoning count is refused.
      const estimate = (usage: string, stream: boolean): number =>
        Math.ceil((Buffer.byteLength(JSON.stringify(chatBody(`usage:${usage}`, { stream }))) + (stream ? 40 : 0)) / 4);
      const hostilePrompts = HOSTILE.filter((_, i) => i !== 5).reduce(
        (sum, u) => sum + estimate(u, false) + estimate(u, true),
        0,
      );
      const hostilePlain = { completion: 0 };
      const hostileStream = { completion: 1 };
      const expected: Counts = {
        requests: 2 * (HOSTILE.length + 1),
        promptTokens: hostilePrompts + 2 * 3 + 2 * 3,
        completionTokens: (HOSTILE.length - 1) * (hostilePlain.completion + hostileStream.completion) + 2 * 2 + 2 * 2,
        reasoningTokens: 2 * 1,
        errors: 0,
        disconnects: 0,
      };
      expect(await keyUsage(h)).toEqual(expected);
      // The tokens-per-minute window holds the same whole number: the next answer's headers say so
      // (with what that answer reserved while it was written: its prompt's estimate and its cap).
      const next = await post(h.baseUrl, secret, chatBody(`usage:${SANE}`, { max_tokens: 1 }));
      const reserved =
        Math.ceil(Buffer.byteLength(JSON.stringify(chatBody(`usage:${SANE}`, { max_tokens: 1 }))) / 4) + 1;
      expect(next.headers['x-ratelimit-remaining-tokens']).toBe(
        onPostgres ? undefined : String(1000 - expected.promptTokens - expected.completionTokens - reserved),
      );
      expected.requests += 1;
      expected.promptTokens += 3;
      expected.completionTokens += 2;
      expected.reasoningTokens += 1;

      // Flushed at shutdown; a daemon on the same store starts and reads the same counters.
      await h.stop();
      running = false;
      h = await startHarness(storePatch, { home: h.home });
      running = true;
      expect(await keyUsage(h)).toEqual(expected);
    });
  });
});
