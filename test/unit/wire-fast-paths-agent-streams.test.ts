/**
 * SseRelay on the streams agents meet (reasoning, tool calls whole and in fragments, refusals,
 * logprobs, unicode and escapes) and on hostile events: with learned layouts it gives exactly what
 * the forced slow path gives, only the id replaced, however the bytes are split.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';

describe("SseRelay on agents' streams: reasoning, tool calls whole and in fragments, refusals, logprobs, unicode and escapes", () => {
  /** Feeds `bytes` in the reads `cuts` makes; returns what the client got. */
  async function relayed(
    bytes: Buffer,
    cuts: number[],
    relay: InstanceType<typeof import('../../src/wire/sse-relay.js').SseRelay>,
  ): Promise<string> {
    const { OutputBatch } = await import('../../src/wire/output-batch.js');
    const out = new OutputBatch();
    let from = 0;
    for (const at of [...cuts, bytes.length]) {
      relay.pushInto(bytes.subarray(from, at), out);
      from = at;
    }
    return out.take().toString('utf8');
  }

  it(
    'gives the client every event, valid JSON, only the id replaced, in order, on the fast path and on the forced slow path alike',
    { timeout: 180_000 },
    async () => {
      const { SseRelay } = await import('../../src/wire/sse-relay.js');
      const { EventLayouts } = await import('../../src/wire/event-layouts.js');
      const { clientEvents, clientTexts, cutsOf, expectedEvents, expectedTexts, streamCase, upstreamBytes } =
        await import('../helpers/agent-stream.js');
      const streams = fc.array(fc.tuple(streamCase, fc.array(fc.nat(), { maxLength: 6 }), fc.boolean()), {
        minLength: 1,
        maxLength: 5,
      });
      // Events the fast path relayed without parsing: the property says nothing unless there are many.
      let events = 0;
      let fastEvents = 0;
      await fc.assert(
        fc.asyncProperty(streams, async (ss) => {
          // One model server: its streams share what they taught the fast path.
          const shapes = new EventLayouts();
          for (const [n, [c, cutSeeds, forwardUsage]] of ss.entries()) {
            const ours = `chatcmpl-ours${n}`;
            const bytes = upstreamBytes(c);
            const cuts = cutsOf(cutSeeds, bytes.length);
            const fast = new SseRelay(ours, forwardUsage, shapes);
            const slow = new SseRelay(ours, forwardUsage, null);
            const fastOut = await relayed(bytes, cuts, fast);
            const slowOut = await relayed(bytes, cuts, slow);
            for (const [path, out, relay] of [
              ['fast', fastOut, fast],
              ['slow', slowOut, slow],
            ] as const) {
              expect({ path, events: clientEvents(out) }).toEqual({
                path,
                events: expectedEvents(c, ours, forwardUsage),
              });
              const texts = clientTexts(out);
              expectedTexts(c, ours, forwardUsage).forEach((t, i) => {
                if (t !== null) expect({ path, i, text: texts[i] }).toEqual({ path, i, text: t });
              });
              expect({ path, done: relay.done, sawError: relay.sawError, invalid: relay.invalid }).toEqual({
                path,
                done: c.end === 'done',
                sawError: c.end === 'error',
                invalid: false,
              });
              if (c.finalUsage || c.usageEveryChunk) expect(relay.usage).not.toBeNull();
            }
            expect(slow.slowEvents).toBe(c.events.length);
            expect(fastOut).toBe(slowOut);
            events += c.events.length;
            fastEvents += c.events.length - fast.slowEvents;
          }
        }),
        { numRuns: 1500 },
      );
      expect(fastEvents / events).toBeGreaterThan(0.1);
    },
  );
});

describe('SseRelay with learned layouts against the forced slow path, on hostile events', () => {
  /** Feeds `bytes` in the reads `cuts` makes; returns the client's bytes (latin1, so a byte is a character). */
  async function relayed(
    relay: InstanceType<typeof import('../../src/wire/sse-relay.js').SseRelay>,
    bytes: Buffer,
    cutSeeds: number[],
  ): Promise<string> {
    const { OutputBatch } = await import('../../src/wire/output-batch.js');
    const cuts = [...new Set(cutSeeds.map((c) => 1 + (c % Math.max(1, bytes.length - 1))))].sort((x, y) => x - y);
    const out = new OutputBatch();
    let from = 0;
    for (const at of [...cuts, bytes.length]) {
      relay.pushInto(bytes.subarray(from, at), out);
      from = at;
    }
    return out.take().toString('latin1');
  }

  /** Everything the client and the accounting see of a relay. */
  const seen = (r: InstanceType<typeof import('../../src/wire/sse-relay.js').SseRelay>, out: string) => ({
    out,
    chunks: r.contentChunks,
    usage: r.usage,
    error: r.sawError,
    invalid: r.invalidReason,
    done: r.done,
  });

  // Token strings a model (and so a client, through its prompt) can make a server write, and
  // raw bytes no server should: quotes, backslashes, an SSE frame inside, NUL, lone surrogates.
  const token = fc.oneof(
    fc.constantFrom(
      'a',
      '',
      '\\"}',
      '\\n\\ndata: {\\"id\\":\\"x\\",\\"error\\":{}}',
      '\\\\',
      '\\u0000',
      '\\ud800',
      '\\u0069d',
      'é',
      '"',
      '\\',
      '\n',
      '\r',
      '}{',
      '","usage":{"completion_tokens":0},"x":"',
      '","error":{"message":"x"},"x":"',
    ),
    fc.string({ maxLength: 3 }),
  );
  // Members around the token: falsy `error`s and null `usage` (learnable), truthy ones (never),
  // a repeated id, plain or escaped.
  const member = fc.constantFrom(
    '',
    ',"error":null',
    ',"error":false',
    ',"error":0',
    ',"error":""',
    ',"usage":null',
    ',"error":{"message":"x"}',
    ',"error":"boom"',
    ',"usage":{"completion_tokens":5}',
    ',"usage":{}',
    ',"id":"up1"',
    ',"\\u0069d":"other"',
  );
  const head = fc.constantFrom('data: ', 'data:', 'data:  ');
  const blank = fc.constantFrom('\n\n', '\r\n\r\n', '\r\n\n', '\n\r\n\r\n');
  const key = fc.constantFrom('content', 'reasoning', 'reasoning_content', 'arguments', 'refusal');
  const idText = fc.constantFrom('up1', 'up2', 'a\\"b', '');
  const parts = fc.record({
    h: head,
    id: idText,
    created: fc.nat(3),
    k: key,
    t: token,
    m: member,
    before: fc.boolean(),
    b: blank,
  });
  type Parts = typeof parts extends fc.Arbitrary<infer P> ? P : never;
  const bytesOf = ({ h, id, created, k, t, m, before, b }: Parts): string =>
    `${h}{"id":"${id}","created":${created}${before ? m : ''},"choices":[{"index":0,"delta":{"${k}":"${t}"${before ? `,"content":"${t}"` : ''}}}]${before ? '' : m}}${b}`;
  const other = fc.constantFrom(
    ': ping\n\n',
    'data: [DONE]\n\n',
    'data:[DONE]\n\n',
    'event: error\ndata: {"message":"m"}\n\n',
    'data: {"id":"up1","choices":[],"usage":{"completion_tokens":3}}\n\n',
    'data: {"id":"up1","choices":[]}{"x":1}\n\n',
  );
  /**
   * A stream's events: parts of their own, or (as real streams) all with the first's but the
   * token, so that later events match the layouts the first taught.
   */
  const streamEvents = fc
    .tuple(
      fc.array(fc.oneof({ weight: 8, arbitrary: parts }, { weight: 1, arbitrary: other }), {
        minLength: 1,
        maxLength: 8,
      }),
      fc.boolean(),
    )
    .map(([es, alike]) => {
      const first = es.find((e): e is Parts => typeof e !== 'string');
      return es.map((e) =>
        typeof e === 'string' ? e : bytesOf(alike && first !== undefined ? { ...first, t: e.t } : e),
      );
    });

  it(
    'gives the client, the token count and the usage exactly what the slow path gives, whatever earlier streams taught',
    { timeout: 180_000 },
    async () => {
      const { SseRelay } = await import('../../src/wire/sse-relay.js');
      const { EventLayouts } = await import('../../src/wire/event-layouts.js');
      const streams = fc.array(fc.tuple(streamEvents, fc.array(fc.nat(), { maxLength: 5 }), fc.boolean()), {
        minLength: 1,
        maxLength: 5,
      });
      await fc.assert(
        fc.asyncProperty(streams, async (ss) => {
          // One model server: its streams share the layouts they taught.
          const shapes = new EventLayouts();
          for (const [n, [events, cutSeeds, forwardUsage]] of ss.entries()) {
            const bytes = Buffer.from(events.join(''));
            const fast = new SseRelay(`chatcmpl-${n}`, forwardUsage, shapes);
            const slow = new SseRelay(`chatcmpl-${n}`, forwardUsage, null);
            const fastSeen = seen(fast, await relayed(fast, bytes, cutSeeds));
            expect(fastSeen).toEqual(seen(slow, await relayed(slow, bytes, cutSeeds)));
            // Every event but the server's error event carries our id, as the client's parser reads it.
            for (const frame of Buffer.from(fastSeen.out, 'latin1').toString('utf8').split('\n\n')) {
              if (frame === '' || frame === 'data: [DONE]') continue;
              expect(frame.startsWith('data: ')).toBe(true);
              const parsed = JSON.parse(frame.slice(6)) as { id?: unknown; error?: unknown };
              if (parsed.error === undefined || parsed.error === null) expect(parsed.id).toBe(`chatcmpl-${n}`);
            }
          }
        }),
        { numRuns: 2000 },
      );
    },
  );

  it(
    'gives what the slow path gives for learned events with bytes inserted, replaced or removed anywhere',
    { timeout: 180_000 },
    async () => {
      const { SseRelay } = await import('../../src/wire/sse-relay.js');
      const { EventLayouts } = await import('../../src/wire/event-layouts.js');
      const bases = [
        'data: {"id":"up1","object":"chat.completion.chunk","created":17,"model":"m","choices":[{"index":0,"delta":{"content":"ab"},"finish_reason":null}]}\n\n',
        'data: {"id":"up1","created":5,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\\"a"}}]}}],"usage":null}\n\n',
        'data:{"id":"up1","choices":[{"delta":{"reasoning":"x","content":null}}],"error":null}\r\n\r\n',
        'data: {"id":"up1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
      ];
      // Bytes that change what JSON or SSE make of an event.
      const byte = fc.constantFrom(
        0x22,
        0x5c,
        0x7b,
        0x7d,
        0x2c,
        0x3a,
        0x0a,
        0x0d,
        0x80,
        0xc3,
        0x30,
        0x65,
        0x75,
        0x20,
        0x00,
      );
      const edit = fc.tuple(fc.nat(), fc.constantFrom('insert', 'replace', 'remove'), byte);
      const mutated = fc.tuple(fc.nat(bases.length - 1), fc.array(edit, { maxLength: 3 })).map(([b, edits]) => {
        const bytes = [...Buffer.from(bases[b] as string)];
        for (const [p, kind, c] of edits) {
          const i = p % (bytes.length + 1);
          if (kind === 'insert') bytes.splice(i, 0, c);
          else if (i < bytes.length) {
            if (kind === 'replace') bytes[i] = c;
            else bytes.splice(i, 1);
          }
        }
        return Buffer.from(bytes);
      });
      await fc.assert(
        fc.asyncProperty(
          fc.array(mutated, { minLength: 1, maxLength: 6 }),
          fc.array(fc.nat(), { maxLength: 4 }),
          fc.boolean(),
          async (events, cutSeeds, forwardUsage) => {
            const shapes = new EventLayouts();
            new SseRelay('chatcmpl-teacher', forwardUsage, shapes).push(Buffer.from(bases.join('')));
            expect(shapes.size).toBe(bases.length);
            const bytes = Buffer.concat(events);
            const fast = new SseRelay('chatcmpl-x', forwardUsage, shapes);
            const slow = new SseRelay('chatcmpl-x', forwardUsage, null);
            const fastSeen = seen(fast, await relayed(fast, bytes, cutSeeds));
            expect(fastSeen).toEqual(seen(slow, await relayed(slow, bytes, cutSeeds)));
          },
        ),
        { numRuns: 3000 },
      );
    },
  );
});
