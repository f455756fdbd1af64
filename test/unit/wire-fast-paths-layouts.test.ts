/**
 * Event layouts learned from a model server's streams: events relayed by their layout give exactly
 * what the slow path gives, a stream's own layout takes its token events after the first, and
 * what must not be learned is not; checked on generated events split at every boundary.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { parses, rawContent } from '../helpers/raw-json-content.js';

describe('EventLayouts: event layouts shared by the streams of one model server', () => {
  // Events as model servers write them: the id varies per stream, created per second, the
  // delta and finish reason per event; some ids need escapes, some numbers are not plain.
  const idText = fc.oneof(
    fc.constant('chatcmpl-1'),
    fc.nat(998).map((n) => `chatcmpl-${n}`),
    fc.constant('a\\"b'),
    fc.constant('\u00e9'),
    fc.constant(''),
  );
  const created = fc.oneof(
    fc.nat(2_000_000_000).map(String),
    fc.constantFrom('0', '01', '1.5', '-3', '12345678901234567'),
  );
  const contentBytes = fc.oneof(
    rawContent.map((c) => Buffer.from(c)),
    fc
      .array(fc.constantFrom([0x61], [0xc3, 0xa9], [0x80], [0xed, 0xa0, 0x80], [0xf0, 0x9f, 0x98, 0x80]), {
        maxLength: 4,
      })
      .map((ps) => Buffer.from(ps.flat())),
  );
  // Every kind of token hole, each with raw bytes that may be a broken literal.
  const deltaKind = fc.constantFrom(
    ['{"role":"assistant","content":"', '"}'],
    ['{"content":"', '"}'],
    ['{}', ''],
    ['{"role":"assistant","content":""}', ''],
    ['{"reasoning":"', '"}'],
    ['{"reasoning_content":"', '"}'],
    ['{"content":null,"refusal":"', '"}'],
    ['{"tool_calls":[{"index":0,"function":{"arguments":"', '"}}]}'],
  );
  // Finish reasons of one length, valid or not: only a compare of every byte after the token tells them apart.
  const finish = fc.constantFrom('null', 'null', '"stop"', 'true', '"ab"', 'nul1', 'nul"');
  type Parts = [id: string, created: string, kind: readonly [string, string], content: Buffer, finish: string];
  const parts = fc.tuple(idText, created, deltaKind, contentBytes, finish);
  const bytesOf = ([id, cr, [open, close], c, fin]: Parts): Buffer =>
    Buffer.concat([
      Buffer.from(
        `data: {"id":"${id}","object":"chat.completion.chunk","created":${cr},"model":"m","choices":[{"index":0,"delta":`,
      ),
      close !== '' ? Buffer.concat([Buffer.from(open), c, Buffer.from(close)]) : Buffer.from(open),
      Buffer.from(`,"finish_reason":${fin}}]}\n\n`),
    ]);
  /**
   * A stream's events: each with its own id, `created` and kind of delta, or (as real streams) all
   * with the first's, so a stream's own layout is made and matched, and only the token and the
   * finish reason vary.
   */
  const streamEvents = fc.tuple(fc.array(parts, { minLength: 1, maxLength: 8 }), fc.boolean()).map(([ps, oneHead]) => {
    const [id0, cr0, kind0] = ps[0] as Parts;
    return ps.map(([id, cr, kind, c, fin]) => bytesOf(oneHead ? [id0, cr0, kind0, c, fin] : [id, cr, kind, c, fin]));
  });

  /** The string path, written out: decode, check with JSON.parse, replace the id, encode. */
  function model(events: Buffer[], ours: string): { out: Buffer; invalid: boolean; chunks: number } {
    let out = '';
    let chunks = 0;
    for (const ev of events) {
      const data = ev.toString('utf8').slice(6, -2);
      if (!parses(data)) return { out: Buffer.from(out), invalid: true, chunks };
      const end = data.indexOf('"', 7);
      const simple = data.startsWith('{"id":"') && end !== -1 && data.lastIndexOf('\\', end) < 7;
      const rewritten = simple
        ? `{"id":"${ours}${data.slice(end)}`
        : JSON.stringify({ ...(JSON.parse(data) as Record<string, unknown>), id: ours });
      out += `data: ${rewritten}\n\n`;
      chunks++;
    }
    return { out: Buffer.from(out), invalid: false, chunks };
  }

  it(
    'gives every stream exactly what the string path gives, whatever the earlier streams taught',
    { timeout: 180_000 },
    async () => {
      const { SseRelay } = await import('../../src/wire/sse-relay.js');
      const { OutputBatch } = await import('../../src/wire/output-batch.js');
      const { EventLayouts } = await import('../../src/wire/event-layouts.js');
      const streams = fc.array(fc.tuple(streamEvents, fc.array(fc.nat(), { maxLength: 4 })), {
        minLength: 1,
        maxLength: 6,
      });
      fc.assert(
        fc.property(streams, (ss) => {
          const shapes = new EventLayouts();
          ss.forEach(([events, cutSeeds], n) => {
            const ours = `chatcmpl-ours${n}`;
            const expected = model(events, ours);
            const bytes = Buffer.concat(events);
            const cuts = [...new Set(cutSeeds.map((c) => 1 + (c % Math.max(1, bytes.length - 1))))].sort(
              (x, y) => x - y,
            );
            const relay = new SseRelay(ours, false, shapes);
            const out = new OutputBatch();
            let from = 0;
            for (const at of [...cuts, bytes.length]) {
              if (relay.invalid) break;
              relay.pushInto(bytes.subarray(from, at), out);
              from = at;
            }
            expect(out.take().toString('latin1')).toBe(expected.out.toString('latin1'));
            expect(relay.invalid).toBe(expected.invalid);
            expect(relay.contentChunks).toBe(expected.chunks);
          });
        }),
        { numRuns: 1500 },
      );
    },
  );

  it('lets a stream take the fast path from its first event, once an earlier stream taught the layouts', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    const { EventLayouts } = await import('../../src/wire/event-layouts.js');
    const stream = (id: number, created: number): Buffer =>
      Buffer.from(
        [
          ...['t0 ', 't1 ', 't2 '].map(
            (t) =>
              `data: {"id":"chatcmpl-${id}","object":"chat.completion.chunk","created":${created},"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"${t}"},"finish_reason":null}]}\n\n`,
          ),
          `data: {"id":"chatcmpl-${id}","object":"chat.completion.chunk","created":${created},"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"stop"}]}\n\n`,
          `data: {"id":"chatcmpl-${id}","object":"chat.completion.chunk","created":${created},"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}\n\n`,
          'data: [DONE]\n\n',
        ].join(''),
      );
    const shapes = new EventLayouts();
    const first = new SseRelay('chatcmpl-a', false, shapes);
    first.push(stream(7, 1_763_870_000));
    // The first event and the finish event are learned; the usage event is always parsed.
    expect(first.slowEvents).toBe(3);
    const second = new SseRelay('chatcmpl-b', false, shapes);
    const text = second.push(stream(512, 1_763_870_042));
    expect(second.slowEvents).toBe(1);
    expect(second.done).toBe(true);
    expect(second.usage).toEqual({ prompt_tokens: 3, completion_tokens: 3, total_tokens: 6 });
    expect(text).toBe(
      stream(512, 1_763_870_042)
        .toString()
        .replaceAll('chatcmpl-512', 'chatcmpl-b')
        .replace(/data: \{[^\n]*"usage"[^\n]*\n\n/, ''),
    );
  });
});

describe("a stream's own layout", () => {
  it("matches the stream's token events after its first: the server's layouts are not consulted again", async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    const { EventLayouts } = await import('../../src/wire/event-layouts.js');
    const tokens = ['Hel', 'lo', ', w', 'orld\\n', ' é', '😀', '', 'a longer token than a word or two'];
    for (const eol of ['\n\n', '\r\n\r\n']) {
      const event = (t: string): string =>
        `data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":1763870000,"model":"m","choices":[{"index":0,"delta":{"content":"${t}"},"logprobs":null,"finish_reason":null}]}${eol}`;
      const shapes = new EventLayouts();
      new SseRelay('chatcmpl-a', false, shapes).push(Buffer.from(event('t0')));
      const consulted = vi.spyOn(EventLayouts.prototype, 'match');
      const relay = new SseRelay('chatcmpl-b', false, shapes);
      // One read per event, as a model server sends them, then all in one read.
      const out =
        tokens.map((t) => relay.push(Buffer.from(event(t)))).join('') +
        relay.push(Buffer.from(tokens.map(event).join('')));
      expect({ eol, consulted: consulted.mock.calls.length, slow: relay.slowEvents }).toEqual({
        eol,
        consulted: 1,
        slow: 0,
      });
      consulted.mockRestore();
      expect(out).toBe(
        [...tokens, ...tokens].map((t) => event(t).replace('chatcmpl-up', 'chatcmpl-b').replace(eol, '\n\n')).join(''),
      );
    }
  });
});

describe('EventLayouts: what is learned, and what is not', () => {
  it('learns nothing from nested ids or ids with escapes', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    const { EventLayouts } = await import('../../src/wire/event-layouts.js');
    const shapes = new EventLayouts();
    const relay = new SseRelay('chatcmpl-x', false, shapes);
    const out = relay.push(
      Buffer.from(
        [
          'data: {"x":{"id":"nested"},"choices":[{"index":0,"delta":{"content":"n"}}]}\n\n',
          'data: {"id":"a\\"b","choices":[{"index":0,"delta":{"content":"e"}}]}\n\n',
        ].join(''),
      ),
    );
    expect(shapes.size).toBe(0);
    expect(relay.slowEvents).toBe(2);
    expect(out).toBe(
      [
        'data: {"x":{"id":"nested"},"choices":[{"index":0,"delta":{"content":"n"}}],"id":"chatcmpl-x"}\n\n',
        'data: {"id":"chatcmpl-x","choices":[{"index":0,"delta":{"content":"e"}}]}\n\n',
      ].join(''),
    );
  });

  it('learns events ended by CRLF CRLF (sse-starlette servers) and sends them ended by LF LF, as the slow path does', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    const { EventLayouts } = await import('../../src/wire/event-layouts.js');
    const shapes = new EventLayouts();
    const relay = new SseRelay('chatcmpl-x', false, shapes);
    const event = (t: string): string => `data: {"id":"a","choices":[{"index":0,"delta":{"content":"${t}"}}]}`;
    const out = relay.push(Buffer.from(['t0', 't1', 'é\\n'].map((t) => `${event(t)}\r\n\r\n`).join('')));
    expect(shapes.size).toBe(1);
    expect(relay.slowEvents).toBe(1);
    expect(out).toBe(['t0', 't1', 'é\\n'].map((t) => `${event(t).replace('"a"', '"chatcmpl-x"')}\n\n`).join(''));
  });

  it('makes a hole of the token in reasoning, tool-call argument fragments and refusals, not only in content', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    const { EventLayouts } = await import('../../src/wire/event-layouts.js');
    const deltas = (t: string): string[] => [
      `{"reasoning":"${t}"}`,
      `{"reasoning_content":"${t}"}`,
      `{"tool_calls":[{"index":0,"function":{"arguments":"${t}"}}]}`,
      `{"content":null,"refusal":"${t}"}`,
      `{"role":"assistant","content":"","reasoning":"${t}"}`,
    ];
    for (const [k, first] of deltas('a').entries()) {
      const shapes = new EventLayouts();
      const relay = new SseRelay('chatcmpl-x', false, shapes);
      const event = (d: string): string =>
        `data: {"id":"up","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":${d},"logprobs":null,"finish_reason":null}]}\n\n`;
      const later = ['{\\"ci', 'ty\\": \\"Z', 'ü', 'rich 😀\\"}', ''].map((t) => deltas(t)[k] as string);
      const out = relay.push(Buffer.from([first, ...later].map(event).join('')));
      expect({ k, slow: relay.slowEvents }).toEqual({ k, slow: 1 });
      expect(out).toBe([first, ...later].map((d) => event(d).replace('"up"', '"chatcmpl-x"')).join(''));
    }
  });
});
