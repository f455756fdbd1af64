/**
 * A stream's events on their way to the client: what is forwarded, what is refused, our id
 * spliced in, and the fast path's learned layouts. One describe per defect found, its story above it.
 */
import { isUtf8 } from 'node:buffer';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { obError } from '../../src/errors.js';
import { normalizeCompletion } from '../../src/wire/chat-response.js';
import { spliceCompletionId } from '../../src/wire/completion-splice.js';
import { EventLayouts, MAX_LAYOUT_BYTES } from '../../src/wire/event-layouts.js';
import { OutputBatch } from '../../src/wire/output-batch.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { alongside, ask, errorEvents, useHostilePair, useRawUpstreamDaemon } from '../helpers/hostile-upstream.js';
import {
  chatBody,
  expectedTokens,
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
 * Regression: an upstream error event followed by the end of the body gave the
 * client two error events: the upstream's, then ours ("ended the stream before it was
 * complete"). An error event now ends the stream: the client gets exactly one, no [DONE], and
 * nothing more is read from the model server.
 */
describe("an error event ends the stream, the client's only one", () => {
  const RUNNER = 'model runner has unexpectedly stopped, this may be due to resource limitations or an internal error';

  // Both relay paths: the learned layouts must never let an error event through as an ordinary one.
  describe.each([
    ['fast path', true],
    ['slow path forced (OB_PROXY_RELAY_FAST_PATH=0)', false],
  ])('%s', (_name, relayFastPath) => {
    const p = useHostilePair({ relayFastPath });

    it('the relay stops at an error event', () => {
      const relay = new SseRelay('chatcmpl-x', false, relayFastPath ? undefined : null);
      expect(relay.push(Buffer.from('data: {"error":{"message":"boom"}}\n\ndata: {"id":"a","choices":[]}\n\n'))).toBe(
        'data: {"error":{"message":"Model server error: boom","type":"api_error","code":"upstream_error","param":null}}\n\n',
      );
      expect(relay.sawError).toBe(true);
    });

    it("an error event then EOF: the chunks so far and exactly one error event (the server's, in our shape), no [DONE]", async () => {
      // Twice: the second stream meets layouts the first taught the instance.
      for (let i = 0; i < 2; i++) {
        const r = await alongside(p, () => ask(p, '[[sim fail=error-event failAfterChunks=2]]', true));
        expect(r.status).toBe(200);
        expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(2));
        expect(errorEvents(r.text)).toEqual([
          {
            error: { message: `Model server error: ${RUNNER}`, type: 'api_error', param: null, code: 'upstream_error' },
          },
        ]);
        expect(sseFrames(r.text).at(-1)?.startsWith('data: {"error"')).toBe(true);
        expect(r.text).not.toContain('[DONE]');
      }
    });

    it("an `event: error` then EOF: one error event in our shape, with the server's message and code", async () => {
      const r = await alongside(p, () => ask(p, '[[sim fail=named-error-event failAfterChunks=2]]', true));
      expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(2));
      expect(errorEvents(r.text)).toEqual([
        { error: { message: 'Model server error: boom', type: 'api_error', code: 'overloaded', param: null } },
      ]);
      expect(r.text).not.toContain('event:');
      expect(r.text).not.toContain('[DONE]');
    });
  });
});

/**
 * Regression: an event starting `{"error"` was taken for an error event by its prefix
 * and forwarded unchecked, so `data: {"error" <not json>` reached the client, whose SDK then
 * threw a parse error. An error event must be valid JSON like any other; a broken one ends the
 * stream with one upstream_error event.
 */
describe('a broken error event ends the stream with one upstream_error', () => {
  it('the relay refuses an error event that is not JSON', () => {
    for (const bad of ['{"error" <not json>', '{ "error": {"message": "x"', '{"error":{"message":"a"}} trailing']) {
      const relay = new SseRelay('chatcmpl-x', false);
      expect(relay.push(Buffer.from(`data: ${bad}\n\ndata: [DONE]\n\n`))).toBe('');
      expect({ bad, invalid: relay.invalid, sawError: relay.sawError }).toEqual({
        bad,
        invalid: true,
        sawError: false,
      });
    }
  });

  const p = useHostilePair();

  it('through the daemon: the chunks so far, then one upstream_error event; the broken event never forwarded', async () => {
    const r = await alongside(p, () => ask(p, '[[sim fail=broken-error-event failAfterChunks=2]]', true));
    expect(r.status).toBe(200);
    expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(2));
    expect(r.text).not.toContain('not json');
    expect(r.text).not.toContain('[DONE]');
    for (const f of sseFrames(r.text)) expect(() => JSON.parse(f.slice(6)) as unknown).not.toThrow();
    expect(errorEvents(r.text)).toEqual([
      obError('upstream_error', {
        message: 'The model server sent an event that is not valid JSON; the stream was ended.',
      }).toBody(),
    ]);
  });
});

/**
 * Regression: frames that were not `data:` events (`event:`, `retry:`, `id:`,
 * comments, an HTML page with blank lines) were forwarded to the client as they came, though
 * docs/reliability.md said no garbage was. The policy now: only `data:` events reach the client,
 * as in OpenAI's wire format; comments and the `id:`/`retry:` fields are dropped; `event:
 * message` is an ordinary event and `event: error` an error event; any other event name, or a
 * line that is not SSE, ends the stream with one upstream_error event.
 */
describe('only data events reach the client', () => {
  const notSse = obError('upstream_error', {
    message: 'The model server sent data that is not an OpenAI event stream; the stream was ended.',
  }).toBody();

  it('the relay drops comments and id/retry fields, and refuses what is not SSE', () => {
    const relay = new SseRelay('chatcmpl-x', false);
    const out = relay.push(
      Buffer.from(
        ': ping\n\nretry: 10\n\nid: 7\nevent: message\ndata: {"id":"a","choices":[]}\n\n: c\r\ndata: {"id":"b","choices":[]}\r\n\r\n',
      ),
    );
    expect(out).toBe('data: {"id":"chatcmpl-x","choices":[]}\n\ndata: {"id":"chatcmpl-x","choices":[]}\n\n');
    for (const bad of [
      '<html>',
      'event: telemetry\ndata: {}',
      'data: {"id":"a","choices":[]}\nfoo: bar',
      'hello world',
    ]) {
      const r = new SseRelay('chatcmpl-x', false);
      expect(r.push(Buffer.from(`${bad}\n\ndata: [DONE]\n\n`))).toBe('');
      expect({ bad, invalid: r.invalid, reason: r.invalidReason }).toEqual({ bad, invalid: true, reason: 'not_sse' });
    }
  });

  const p = useHostilePair();

  it('comments, retry, id and `event: message`: the data events alone reach the client, whole', async () => {
    const r = await alongside(p, () => ask(p, '[[sim fail=sse-fields]]', true));
    expect(r.status).toBe(200);
    const frames = sseFrames(r.text);
    expect(frames.every((f) => f.startsWith('data: ') && !f.includes('\n'))).toBe(true);
    expect(streamTokens(frames)).toEqual(expectedTokens(4));
    expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
  });

  it('an HTML page: one upstream_error event and nothing of the page', async () => {
    const r = await alongside(p, () => ask(p, '[[sim fail=html-frames]]', true));
    expect(r.status).toBe(200);
    expect(r.text).toBe(`data: ${JSON.stringify(notSse)}\n\n`);
  });

  it('an unknown event name: the chunks before it, then one upstream_error event, no [DONE]', async () => {
    const r = await alongside(p, () => ask(p, '[[sim fail=named-event failAfterChunks=2]]', true));
    expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(2));
    expect(errorEvents(r.text)).toEqual([notSse]);
    expect(r.text).not.toContain('telemetry');
    expect(r.text).not.toContain('[DONE]');
  });
});

/**
 * Regression: an event holding a raw CR as JSON whitespace (`{"id":"a",\r"choices":…}`)
 * was forwarded with it, its id spliced into the text. JSON allows that CR, but SSE clients end a
 * line at a CR (the openai SDK's line decoder does), so the client got half an event and a parse
 * error. Such an event is now encoded again, without the whitespace, and never learned as a layout.
 */
describe('an event with a raw CR is encoded again', () => {
  it('an event with a raw CR inside reaches the client as one line, and teaches the fast path nothing', () => {
    const shapes = new EventLayouts();
    const relay = new SseRelay('ours', false, shapes);
    const event = 'data: {"id":"up",\r"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n';
    const out = relay.push(Buffer.from(event + event));
    expect(out).toBe('data: {"id":"ours","choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'.repeat(2));
    expect(out).not.toContain('\r');
    expect(shapes.size).toBe(0);
    expect(relay.slowEvents).toBe(2);
  });

  it('nor does an error event', () => {
    const relay = new SseRelay('ours', false);
    expect(relay.push(Buffer.from('data: {"error":\r{"message":"boom"}}\n\n'))).toBe(
      'data: {"error":{"message":"Model server error: boom","type":"api_error","code":"upstream_error","param":null}}\n\n',
    );
    expect(relay.sawError).toBe(true);
  });
});

/**
 * Regression (id splicing): our id is spliced over the text of the server's
 * first key, `{"id":"…"`, and the rest sent as it came. A chunk or an answer repeating the key
 * later (`…,"id":"up"}`, or spelled with an escape, `"\u0069d"`, which the plain answer's check
 * for a second `"id"` missed) reached the client with both, and JSON parsers (the proxy's, the
 * client's) take the last: the client read the server's id, not ours, and a stream's events
 * differed from the plain path's (normalizeCompletion) answer. Such an event or answer is now
 * encoded again with our id as its only one; a nested id (a tool call's) is still spliced over.
 */
describe('an event with a repeated id key gets our id only', () => {
  const chunk = (t: string, extra: string): string =>
    `data: {"id":"up","object":"chat.completion.chunk","created":1,"model":"${MODEL}","choices":[{"index":0,"delta":{"content":"${t}"},"finish_reason":null}]${extra}}\n\n`;
  const REPEATS = [',"id":"up"', ',"id":"other"', ',"\\u0069d":"up"', ',"i\\u0064":"up"'];

  /** The ids the client reads, event by event. */
  const ids = (text: string): unknown[] =>
    text
      .split('\n\n')
      .filter((f) => f.startsWith('data: {'))
      .map((f) => (JSON.parse(f.slice(6)) as { id: unknown }).id);

  it('a stream event repeating `id` reaches the client with ours as its only id, on the fast and the slow path', () => {
    for (const repeat of REPEATS) {
      const bytes = Buffer.from(chunk('a', repeat) + chunk('b', repeat) + chunk('c', ''));
      const fast = new SseRelay('chatcmpl-ours', false, new EventLayouts());
      const slow = new SseRelay('chatcmpl-ours', false, null);
      const out = fast.push(bytes);
      expect(out).toBe(slow.push(bytes));
      expect({ repeat, ids: ids(out) }).toEqual({ repeat, ids: ['chatcmpl-ours', 'chatcmpl-ours', 'chatcmpl-ours'] });
    }
  });

  it('a tool call id nested in an event is no repeat: the event is spliced, as sent', () => {
    const event =
      'data: {"id":"up","choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_1","type":"function","index":0,"function":{"name":"f","arguments":"{\\"i\\u0064\\":1}"}}]}}]}\n\n';
    const relay = new SseRelay('chatcmpl-ours', false, null);
    expect(relay.push(Buffer.from(event))).toBe(event.replace('"id":"up"', '"id":"chatcmpl-ours"'));
  });

  const answer = (repeat: string): string =>
    `{"id":"up","object":"chat.completion","created":1,"model":"${MODEL}","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]${repeat}}`;

  it('a plain answer repeating `id` (escaped) is not spliced: normalizeCompletion gives it our id', () => {
    for (const repeat of REPEATS) {
      const text = answer(repeat);
      const parsed = JSON.parse(text) as unknown;
      const spliced = spliceCompletionId(Buffer.from(text), text, parsed, 'chatcmpl-ours');
      if (spliced !== null) {
        expect(JSON.parse(spliced.toString())).toEqual(normalizeCompletion(parsed, 'chatcmpl-ours', MODEL, 1));
      }
      expect({
        repeat,
        id: (JSON.parse((spliced ?? Buffer.from('{}')).toString()) as { id?: unknown }).id,
      }).not.toEqual({
        repeat,
        id: 'up',
      });
    }
  });

  const srv = useRawUpstreamDaemon(({ stream, content }) => {
    const repeat = REPEATS[Number(content)] as string;
    return { body: stream ? chunk('a', repeat) + chunk('b', repeat) + 'data: [DONE]\n\n' : answer(repeat) };
  });

  it('through the daemon: the client reads our id, never the server`s, streamed or not', async () => {
    for (const [n, repeat] of REPEATS.entries()) {
      const plain = await post(srv.h.baseUrl, srv.key, chatBody(String(n)));
      expect(plain.status).toBe(200);
      const id = (plain.json as { id: string }).id;
      expect({ repeat, id }).toEqual({ repeat, id: expect.stringMatching(/^chatcmpl-/) as unknown });
      expect(plain.text).not.toContain('"up"');

      const streamed = await post(srv.h.baseUrl, srv.key, chatBody(String(n), { stream: true }));
      expect(streamed.status).toBe(200);
      const got = ids(streamed.text);
      expect({ repeat, got }).toEqual({ repeat, got: [got[0], got[0]] });
      expect(got[0]).toMatch(/^chatcmpl-/);
      expect(streamed.text).not.toContain('"up"');
      expect(streamed.text.endsWith('data: [DONE]\n\n')).toBe(true);
    }
  });
});

/**
 * Regression (upstream faults): an upstream event that was not valid JSON was forwarded
 * to the client as it was, so the OpenAI SDK threw a parse error instead of an API error. Now the
 * relay stops at it and the stream ends with one upstream_error event and no [DONE].
 */
describe('an invalid JSON event ends the stream with one upstream_error', () => {
  it('the relay does not forward a data event that is not JSON, nor anything after it', () => {
    const relay = new SseRelay('chatcmpl-x', false);
    const ok = relay.push(Buffer.from('data: {"id":"a","choices":[{"index":0,"delta":{"content":"t0 "}}]}\n\n'));
    expect(ok).toBe('data: {"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":"t0 "}}]}\n\n');
    expect(
      relay.push(
        Buffer.from('data: {"id":"a","choices":[{"index":0,"delta":{"cont\n\ndata: {"id":"a"}\n\ndata: [DONE]\n\n'),
      ),
    ).toBe('');
    expect({ invalid: relay.invalid, done: relay.done, contentChunks: relay.contentChunks }).toEqual({
      invalid: true,
      done: false,
      contentChunks: 1,
    });
    // A broken usage event is refused too.
    const usage = new SseRelay('chatcmpl-y', true);
    expect(usage.push(Buffer.from('data: {"choices":[],"usage":{"prompt_tokens":\n\n'))).toBe('');
    expect(usage.invalid).toBe(true);
  });

  let h: Harness;
  let sim: Simulator;
  let key: string;
  beforeAll(async () => {
    h = await startHarness();
    const s = await startSim();
    sim = s.sim;
    key = await readyInstance(h, 'bad-json', s.url);
  });
  afterAll(async () => {
    await h.stop();
    await sim.close();
  });

  it('through the daemon: every event the client receives parses, and an error event ends the stream', async () => {
    const r = await post(h.baseUrl, key, chatBody('[[sim fail=invalid-json]]', { stream: true }));
    expect(r.status).toBe(200);
    const frames = sseFrames(r.text);
    expect(frames.map((f) => JSON.parse(f.slice(6)) as unknown)).toEqual([
      obError('upstream_error', {
        message: 'The model server sent an event that is not valid JSON; the stream was ended.',
      }).toBody(),
    ]);
  });
});

/**
 * Regression (found while reworking the stream fast path): a content frame matching the
 * learned template was forwarded as raw bytes, including bytes that are not UTF-8, which a strict
 * client decoder (Python's json on bytes) rejects for the whole event. The template path now
 * accepts only well-formed UTF-8 inside the content literal; anything else takes the string path,
 * whose decoding replaces bad bytes with U+FFFD, as it did for the first frame of every stream.
 */
describe('invalid UTF-8 in content is replaced, never relayed', () => {
  it('a template frame whose content is not UTF-8 reaches the client repaired', () => {
    const head = 'data: {"id":"up","choices":[{"index":0,"delta":{"content":"';
    const tail = '"}}]}\n\n';
    const relay = new SseRelay('chatcmpl-x', false);
    const out = new OutputBatch();
    relay.pushInto(Buffer.from(`${head}ok${tail}`), out);
    relay.pushInto(
      Buffer.concat([Buffer.from(`${head}a`), Buffer.from([0xed, 0xa0, 0x80, 0xc3]), Buffer.from(`b${tail}`)]),
      out,
    );
    const sent = out.take();
    expect(isUtf8(sent)).toBe(true);
    expect(sent.toString()).toBe(
      'data: {"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":"ok"}}]}\n\n' +
        'data: {"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":"a\uFFFD\uFFFD\uFFFD\uFFFDb"}}]}\n\n',
    );
  });
});

/**
 * Regression (stream fast path): a model server writing its events as
 * `data:{…}` (no space after the colon, as SSE allows) had its first event parsed by the slow
 * path and sent as `data: {…}`, and every later event of the layout that first one taught
 * copied by the fast path with the server's own `data:{` head. The fast path's promise is the
 * slow path's bytes; a client reading `data: ` lines (the OpenAI wire format, and many hand-made
 * clients) could not parse the copied events. The client now gets `data: {"id":"<ours>…` for
 * every event, whichever head the server wrote, on either path.
 */
describe('every event reaches the client as `data: ` and our id', () => {
  const event = (id: string, delta: string, finish = 'null', head = 'data:'): string =>
    `${head}{"id":"${id}","object":"chat.completion.chunk","created":1763870000,"model":"${MODEL}","choices":[{"index":0,"delta":${delta},"finish_reason":${finish}}]}\n\n`;
  const tokens = ['Hel', 'lo', ' wor', 'ld'];
  const upstream = (id: string, head: string): string =>
    [
      ...tokens.map((t) => event(id, `{"role":"assistant","content":"${t}"}`, 'null', head)),
      event(id, '{}', '"stop"', head),
      `${head} [DONE]\n\n`.replace('data: ', 'data:'),
    ].join('');

  it('the fast path sends `data: ` before every event, as the slow path does, for a server writing `data:`', () => {
    const shapes = new EventLayouts();
    const fast = new SseRelay('chatcmpl-ours', false, shapes);
    const slow = new SseRelay('chatcmpl-ours', false, null);
    const bytes = Buffer.from(upstream('up-1', 'data:'));
    const fastOut = fast.push(bytes);
    expect(fast.slowEvents).toBeLessThan(5);
    expect(fastOut).toBe(slow.push(bytes));
    expect(fastOut).toBe(upstream('chatcmpl-ours', 'data: ').replace('data:[DONE]', 'data: [DONE]'));
    // A second stream of that server, its layouts learned, all on the fast path.
    const next = new SseRelay('chatcmpl-next', false, shapes);
    expect(next.push(Buffer.from(upstream('up-2', 'data:')))).toBe(
      upstream('chatcmpl-next', 'data: ').replace('data:[DONE]', 'data: [DONE]'),
    );
    // Only `data:[DONE]`, which is not `data: [DONE]` byte for byte, is parsed.
    expect(next.slowEvents).toBe(1);
  });

  const srv = useRawUpstreamDaemon(() => ({ body: upstream('chatcmpl-up', 'data:') }));

  it('through the daemon: every event of such a server reaches the client as `data: {…}`, stream after stream', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await post(srv.h.baseUrl, srv.key, chatBody('hi', { stream: true }));
      expect(r.status).toBe(200);
      const id = /"id":"([^"]+)"/.exec(r.text)?.[1] as string;
      expect(id).toMatch(/^chatcmpl-/);
      expect(r.text).toBe(upstream(id, 'data: ').replace('data:[DONE]', 'data: [DONE]'));
    }
  });
});

/**
 * Regression (found by the relay's property test on agents' streams): the slow path
 * told a usage chunk by the text `"usage":{` and an error event by `{"error"`. A server that
 * writes JSON with spaces (Python's json.dumps: `"usage": {`) or a key with escapes
 * (`"\u0075sage"`) had its usage chunk forwarded to clients that had not asked for it, and its
 * tokens went uncounted (the relay fell back to counting events); an error event not starting
 * with `{"error"` was forwarded as an ordinary chunk, so the stream went on and the client got a
 * second error event at the end. Every event the slow path sees is now parsed and judged by what
 * it holds; a usage chunk the client asked for keeps its bytes.
 */
describe('a usage chunk is judged by what it holds', () => {
  const content =
    'data: {"id":"up","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}]}\n\n';
  const ours = content.replace('"id":"up"', '"id":"ours"');

  describe.each([
    ['fast path', undefined],
    ['slow path', null],
  ] as const)('%s', (_name, shapes) => {
    it('a usage chunk written with spaces is counted and not forwarded unasked', () => {
      const relay = new SseRelay('ours', false, shapes);
      const out = relay.push(
        Buffer.from(
          `${content}data: {"id": "up", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}\n\ndata: [DONE]\n\n`,
        ),
      );
      expect(out).toBe(`${ours}data: [DONE]\n\n`);
      expect(relay.usage).toEqual({ prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 });
    });

    it('a usage key with escapes is a usage key', () => {
      const relay = new SseRelay('ours', false, shapes);
      const out = relay.push(
        Buffer.from(
          `${content}data: {"id":"up","choices":[],"\\u0075sage":{"prompt_tokens":3,"completion_tokens":2}}\n\n`,
        ),
      );
      expect(out).toBe(ours);
      expect(relay.usage).toEqual({ prompt_tokens: 3, completion_tokens: 2 });
    });

    it('usage on a content chunk (vLLM continuous usage) is counted, and removed unless asked', () => {
      const relay = new SseRelay('ours', false, shapes);
      const out = relay.push(
        Buffer.from(
          'data: {"id":"up","choices":[{"index":0,"delta":{"content":"x"}}], "usage": {"prompt_tokens":3,"completion_tokens":1}}\n\n',
        ),
      );
      expect(JSON.parse(out.slice(6))).toEqual({ id: 'ours', choices: [{ index: 0, delta: { content: 'x' } }] });
      expect(relay.usage).toEqual({ prompt_tokens: 3, completion_tokens: 1 });
    });

    it('a usage chunk the client asked for leaves with its bytes, only the id replaced', () => {
      const relay = new SseRelay('ours', true, shapes);
      const usage =
        'data: {"id":"up","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"note":"\\u00e9\\/"}}\n\n';
      expect(relay.push(Buffer.from(usage))).toBe(usage.replace('"id":"up"', '"id":"ours"'));
    });

    it('an error event is one whatever its spelling: the relay stops there', () => {
      for (const data of [
        '{"\\u0065rror":{"message":"boom"}}',
        '{"id":"up","error":{"message":"boom"}}',
        '{ "error" : {"message":"boom"}}',
      ]) {
        const relay = new SseRelay('ours', false, shapes);
        expect(relay.push(Buffer.from(`data: ${data}\n\n${content}`))).toBe(
          'data: {"error":{"message":"Model server error: boom","type":"api_error","code":"upstream_error","param":null}}\n\n',
        );
        expect(relay.sawError).toBe(true);
      }
    });

    it("an `error` the client's SDK would not throw on (null, false, empty) is an ordinary event", () => {
      const relay = new SseRelay('ours', false, shapes);
      expect(relay.push(Buffer.from('data: {"id":"up","error":null,"choices":[]}\n\n'))).toBe(
        'data: {"id":"ours","error":null,"choices":[]}\n\n',
      );
      expect(relay.sawError).toBe(false);
    });
  });
});

/**
 * Regression (stream fast path): a learned event layout kept a copy of every
 * byte of the event it was learned from but its holes, up to the frame cap (1 MiB by default).
 * Layouts live as long as the daemon (four per model server, for up to 10,000 servers), so a
 * model server's few events with large fixed parts (a big `system_fingerprint`, logprobs, or a
 * hostile server's filler) pinned megabytes per instance for good. A layout now keeps at most
 * MAX_LAYOUT_BYTES (4 KiB) besides its holes; an event with more is relayed by the slow path,
 * with the same bytes, and its token string may still be of any size.
 */
describe('a learned layout holds at most MAX_LAYOUT_BYTES', () => {
  const event = (fixed: string, token: string): string =>
    `data: {"id":"up","object":"chat.completion.chunk","created":1,"model":"m","system_fingerprint":"${fixed}","choices":[{"index":0,"delta":{"content":"${token}"},"finish_reason":null}]}\n\n`;

  it('events with 256 KiB of fixed bytes are relayed as the slow path does, and no layout keeps them', () => {
    const shapes = new EventLayouts();
    const fast = new SseRelay('ours', false, shapes);
    const slow = new SseRelay('ours', false, null);
    // Four distinct large events, each twice (the second would match the layout the first taught).
    const bytes = Buffer.from(
      ['a', 'b', 'c', 'd']
        .flatMap((f) => [event(f.repeat(256 * 1024), 't1'), event(f.repeat(256 * 1024), 't2')])
        .join(''),
    );
    expect(fast.push(bytes)).toBe(slow.push(bytes));
    expect(fast.contentChunks).toBe(8);
    expect(shapes.bytes).toBeLessThanOrEqual(4 * MAX_LAYOUT_BYTES);
  });

  it('a large token string still takes the fast path: only the fixed bytes count', () => {
    const shapes = new EventLayouts();
    const relay = new SseRelay('ours', false, shapes);
    const big = 'x'.repeat(512 * 1024);
    const out = relay.push(Buffer.from(event('fp', big) + event('fp', big) + event('fp', 'y')));
    expect(out).toBe((event('fp', big) + event('fp', big) + event('fp', 'y')).replaceAll('"id":"up"', '"id":"ours"'));
    expect(relay.slowEvents).toBe(1);
    expect(shapes.size).toBe(1);
    expect(shapes.bytes).toBeLessThanOrEqual(MAX_LAYOUT_BYTES);
  });
});

/**
 * Regression (layout poisoning): a model server's learned event layouts are
 * four, shared by all its streams, and a stream kept to the fast path only while the layout of
 * its events stayed among them. A stream whose every event has a layout of its own (a client
 * asking for `logprobs`: each token and its logprob are fixed bytes, not a hole) replaced all
 * four at every event, so every other key's stream on that server, finding its layout gone by
 * its next event, took the slow path (decode, parse, encode: about four times the CPU) for
 * every event. A stream now makes its own layout from the event the slow path learned from, and
 * keeps it: after its first event it no longer needs the shared set.
 */
describe('a logprobs stream keeps a layout of its own', () => {
  const event = (id: string, token: string, logprobs: boolean): string =>
    `data: {"id":"${id}","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"${token}"},"logprobs":${
      logprobs ? `{"content":[{"token":"${token}","logprob":-0.${token.length},"top_logprobs":[]}]}` : 'null'
    },"finish_reason":null}]}\n\n`;

  it('a stream keeps the fast path while another stream of its server asks for logprobs', () => {
    const shapes = new EventLayouts();
    const withLogprobs = new SseRelay('chatcmpl-a', false, shapes);
    const plain = new SseRelay('chatcmpl-b', false, shapes);
    const plainSlow = new SseRelay('chatcmpl-b', false, null);
    let out = '';
    let expected = '';
    // Interleaved, as the streams of one server are: four logprobs events between two plain ones.
    for (let i = 0; i < 50; i++) {
      for (let k = 0; k < 4; k++) withLogprobs.push(Buffer.from(event('up-a', `w${i}x${k}`, true)));
      const bytes = Buffer.from(event('up-b', `t${i}`, false));
      out += plain.push(bytes);
      expected += plainSlow.push(bytes);
    }
    expect(out).toBe(expected);
    expect(plain.contentChunks).toBe(50);
    // Only its first event is parsed.
    expect(plain.slowEvents).toBe(1);
  });
});
