/**
 * The fast paths of the wire layer (bytes relayed without parsing, ids spliced into text) give
 * exactly what the slow paths give: checked against JSON.parse and normalizeCompletion on
 * generated input, split at every boundary.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';

function parses(s: string): boolean {
  try {
    JSON.parse(s);
    return true;
  } catch {
    return false;
  }
}

// Raw text between the quotes: printable characters, escapes good and bad, control characters, quotes.
const rawContent = fc
  .array(
    fc.oneof(
      fc.string({ maxLength: 4 }),
      fc.constantFrom(
        '\\n',
        '\\"',
        '\\\\',
        '\\u00e9',
        '\\uZZZZ',
        '\\x',
        '\\',
        '"',
        '\n',
        '\t',
        '\u0001',
        'é',
        '😀',
        '}',
        ']',
      ),
    ),
    { maxLength: 6 },
  )
  .map((parts) => parts.join(''));

describe('SseRelay framing (one pass over newlines)', () => {
  const frames = (eol: string): string =>
    [
      `data: {"id":"a","choices":[{"index":0,"delta":{"content":"h\u00e9llo"}}]}${eol}${eol}`,
      `: keep-alive comment${eol}${eol}`,
      `data: {"id":"a","choices":[{"index":0,"delta":{"content":"w\\nrld 😀"}}]}${eol}${eol}`,
      `data: {"id":"a","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}${eol}${eol}`,
      `data: [DONE]${eol}${eol}`,
    ].join('');

  it('gives the same output however the bytes are split, LF or CRLF', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    for (const eol of ['\n', '\r\n']) {
      const bytes = Buffer.from(frames(eol));
      const whole = new SseRelay('chatcmpl-x', true);
      const expected = whole.push(bytes);
      expect(whole.done).toBe(true);
      expect(expected.match(/^data: /gm)).toHaveLength(4);
      fc.assert(
        fc.property(fc.uniqueArray(fc.integer({ min: 1, max: bytes.length - 1 }), { maxLength: 20 }), (cuts) => {
          const relay = new SseRelay('chatcmpl-x', true);
          let out = '';
          let from = 0;
          for (const at of [...cuts].sort((x, y) => x - y)) {
            out += relay.push(bytes.subarray(from, at));
            from = at;
          }
          out += relay.push(bytes.subarray(from));
          expect(out).toBe(expected);
          expect(relay.done).toBe(true);
          expect(relay.usage).toEqual({ prompt_tokens: 3, completion_tokens: 2 });
        }),
        { numRuns: 300 },
      );
    }
  });
});

describe('SseRelay template path (frames forwarded as bytes)', () => {
  const head = (role: boolean): string =>
    `data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{${role ? '"role":"assistant",' : ''}"content":`;
  const tail = '},"finish_reason":null}]}\n\n';

  it('forwards exactly what the string path would, stops at the first invalid frame, however split', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    const frame = fc.tuple(fc.boolean(), rawContent).map(([role, c]) => ({
      text: `${head(role)}"${c}"${tail}`,
      data: `${head(role).slice(6)}"${c}"${tail.slice(0, -2)}`,
    }));
    fc.assert(
      fc.property(
        fc.array(frame, { minLength: 1, maxLength: 10 }),
        fc.array(fc.nat(), { maxLength: 8 }),
        (frames, cutSeeds) => {
          // The model: each frame checked with JSON.parse, its id replaced, until the first invalid one.
          let expected = '';
          let valid = 0;
          let invalid = false;
          for (const f of frames) {
            if (!parses(f.data)) {
              invalid = true;
              break;
            }
            valid++;
            expected += `data: ${f.data.replace('"id":"chatcmpl-up"', '"id":"chatcmpl-x"')}\n\n`;
          }
          const bytes = Buffer.from(frames.map((f) => f.text).join(''));
          const cuts = [...new Set(cutSeeds.map((n) => 1 + (n % Math.max(1, bytes.length - 1))))].sort((x, y) => x - y);
          const relay = new SseRelay('chatcmpl-x', false);
          let out = '';
          let from = 0;
          for (const at of [...cuts, bytes.length]) {
            if (relay.invalid) break;
            out += relay.push(bytes.subarray(from, at));
            from = at;
          }
          expect(out).toBe(expected);
          expect(relay.invalid).toBe(invalid);
          expect(relay.contentChunks).toBe(valid);
        },
      ),
      { numRuns: 1000 },
    );
  });
});

describe('SseRelay template path: bytes that are not UTF-8', () => {
  it('sends the bytes the string path would (repaired), never the raw invalid ones', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    const { OutputBatch } = await import('../../src/wire/output-batch.js');
    const head =
      'data: {"id":"chatcmpl-up","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":';
    const tail = '},"finish_reason":null}]}\n\n';
    // Content bytes: ASCII letters, valid sequences, and the classic invalid ones (lone
    // continuation, truncated, overlong, surrogate, above U+10FFFF).
    const piece = fc.constantFrom(
      [0x61],
      [0xc3, 0xa9],
      [0xe2, 0x82, 0xac],
      [0xf0, 0x9f, 0x98, 0x80],
      [0x80],
      [0xc3],
      [0xe2, 0x82],
      [0xc0, 0xaf],
      [0xe0, 0x80, 0xaf],
      [0xed, 0xa0, 0x80],
      [0xf4, 0x90, 0x80, 0x80],
      [0xff],
    );
    const content = fc.array(piece, { maxLength: 6 }).map((ps) => Buffer.from(ps.flat()));
    fc.assert(
      fc.property(fc.array(content, { minLength: 1, maxLength: 6 }), (contents) => {
        const frames = contents.map((c) => Buffer.concat([Buffer.from(`${head}"`), c, Buffer.from(`"${tail}`)]));
        // The model: each frame decoded (repairing bad bytes), id replaced, encoded again.
        const expected = Buffer.from(
          frames.map((f) => f.toString('utf8').replace('"id":"chatcmpl-up"', '"id":"chatcmpl-x"')).join(''),
        );
        const relay = new SseRelay('chatcmpl-x', false);
        const out = new OutputBatch();
        for (const f of frames) relay.pushInto(f, out);
        expect(out.take().equals(expected)).toBe(true);
        expect(relay.contentChunks).toBe(frames.length);
      }),
      { numRuns: 1000 },
    );
  });
});

describe('spliceCompletionId: the same JSON as normalizeCompletion, or null', () => {
  it('agrees with normalizeCompletion on answers of every shape', async () => {
    const { spliceCompletionId } = await import('../../src/wire/completion-splice.js');
    const { normalizeCompletion } = await import('../../src/wire/chat-response.js');
    const choice = fc.record(
      {
        index: fc.oneof(fc.nat(3), fc.constant('0')),
        message: fc.oneof(
          fc.record(
            {
              role: fc.oneof(fc.constant('assistant'), fc.constant(7)),
              content: fc.oneof(fc.string(), fc.constant(null)),
            },
            { requiredKeys: [] },
          ),
          fc.constant(null),
          fc.constant([]),
        ),
        finish_reason: fc.oneof(fc.constant('stop'), fc.constant(null)),
        tool: fc.record({ id: fc.string() }),
      },
      { requiredKeys: ['message'] },
    );
    const answer = fc.record(
      {
        id: fc.oneof(fc.constant('chatcmpl-1'), fc.constant('a"b'), fc.constant(5)),
        object: fc.oneof(fc.constant('chat.completion'), fc.constant('other')),
        created: fc.oneof(fc.constant(1_763_870_000), fc.constant(1.5), fc.constant('x')),
        model: fc.oneof(fc.constant('gemma4:26b'), fc.constant(''), fc.constant(null)),
        choices: fc.oneof(fc.array(choice, { maxLength: 3 }), fc.constant({})),
        usage: fc.record({ prompt_tokens: fc.nat(), completion_tokens: fc.nat() }),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(
        answer,
        fc.constantFrom('', '"id":"again"', '"\\u0069d":"chatcmpl-1"', '"i\\u0064":5'),
        (a, dupId) => {
          const whole = JSON.stringify(a);
          // A second "id" after the members, plain or escaped (none when the generated answer is `{}`).
          const text = dupId !== '' ? `${whole.slice(0, -1)}${whole === '{}' ? '' : ','}${dupId}}` : whole;
          const parsed = JSON.parse(text) as unknown;
          const spliced = spliceCompletionId(Buffer.from(text), text, parsed, 'chatcmpl-ours');
          if (spliced !== null) {
            expect(JSON.parse(spliced.toString())).toEqual(
              normalizeCompletion(parsed, 'chatcmpl-ours', 'gemma4:26b', 42),
            );
          }
        },
      ),
      { numRuns: 2000 },
    );
    // The common answer takes the fast path.
    const ollama =
      '{"id":"chatcmpl-7","object":"chat.completion","created":1763870000,"model":"gemma4:26b","system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}';
    const accented = ollama.replace('"Hi"', '"Ça va 😀"');
    expect(spliceCompletionId(Buffer.from(accented), accented, JSON.parse(accented), 'chatcmpl-ours')?.toString()).toBe(
      accented.replace('chatcmpl-7', 'chatcmpl-ours'),
    );
    // Bytes that are not UTF-8 take the slow path, whose re-encoding repairs them.
    const broken = Buffer.concat([
      Buffer.from(ollama.slice(0, ollama.indexOf('Hi'))),
      Buffer.from([0xff, 0xc3]),
      Buffer.from(ollama.slice(ollama.indexOf('Hi') + 2)),
    ]);
    const brokenText = broken.toString('utf8');
    expect(spliceCompletionId(broken, brokenText, JSON.parse(brokenText), 'chatcmpl-ours')).toBeNull();
  });
});

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

describe('SseRelay: frames near the cap, CRLF frames, comments and fields, however split', () => {
  const CAP = 256;
  type Frame = { bytes: string; out: string; stops: 'done' | null };
  const eolOf = fc.constantFrom('\n', '\r\n');
  const event = (content: string): string =>
    `{"id":"up","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"${content}"}}]}`;
  const ours = (content: string): string => `data: ${event(content).replace('"id":"up"', '"id":"chatcmpl-x"')}\n\n`;
  // Content lengths around the cap: the event's other bytes are about 100.
  const content = fc.nat({ max: 200 }).map((n) => 'abcdefghij'.repeat(21).slice(0, n));
  const frame: fc.Arbitrary<Frame> = fc.oneof(
    fc.tuple(content, eolOf).map(([c, eol]) => ({ bytes: `data: ${event(c)}${eol}${eol}`, out: ours(c), stops: null })),
    fc.tuple(content, eolOf).map(([c, eol]) => ({
      bytes: `id: 7${eol}event: message${eol}data: ${event(c)}${eol}${eol}`,
      out: ours(c),
      stops: null,
    })),
    fc.tuple(content, eolOf).map(([c, eol]) => ({
      bytes: `: tick${eol}data: ${event(c)}${eol}retry: 5${eol}${eol}`,
      out: ours(c),
      stops: null,
    })),
    fc
      .tuple(fc.constantFrom(': keep-alive', 'retry: 3000', 'id: 9', ':'), eolOf)
      .map(([f, eol]) => ({ bytes: `${f}${eol}${eol}`, out: '', stops: null })),
    eolOf.map((eol) => ({ bytes: `data: [DONE]${eol}${eol}`, out: 'data: [DONE]\n\n', stops: 'done' as const })),
  );

  /** The model: frames in order; one over the cap (its blank line counted) stops the relay, forwarding nothing of it. */
  function model(frames: Frame[]): { out: string; reason: string | null; done: boolean } {
    let out = '';
    for (const f of frames) {
      if (Buffer.byteLength(f.bytes) > CAP) return { out, reason: 'frame_too_large', done: false };
      out += f.out;
      if (f.stops === 'done') return { out, reason: null, done: true };
    }
    return { out, reason: null, done: false };
  }

  it('gives what the frames say, refuses the first over the cap, and never holds the cap', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    const { OutputBatch } = await import('../../src/wire/output-batch.js');
    const { EventLayouts } = await import('../../src/wire/event-layouts.js');
    const shapes = new EventLayouts();
    fc.assert(
      fc.property(
        fc.array(frame, { minLength: 1, maxLength: 10 }),
        fc.array(fc.nat(), { maxLength: 12 }),
        (frames, cutSeeds) => {
          const expected = model(frames);
          const bytes = Buffer.from(frames.map((f) => f.bytes).join(''));
          const cuts = [...new Set(cutSeeds.map((c) => 1 + (c % Math.max(1, bytes.length - 1))))].sort((x, y) => x - y);
          // Layouts learned by earlier runs are shared, as between the streams of one server.
          const relay = new SseRelay('chatcmpl-x', false, shapes, CAP);
          const out = new OutputBatch();
          let from = 0;
          for (const at of [...cuts, bytes.length]) {
            relay.pushInto(bytes.subarray(from, at), out);
            from = at;
            expect(relay.pendingBytes).toBeLessThan(CAP);
          }
          expect(out.take().toString()).toBe(expected.out);
          expect({ reason: relay.invalidReason, done: relay.done }).toEqual({
            reason: expected.reason,
            done: expected.done,
          });
        },
      ),
      { numRuns: 1500 },
    );
  });

  it('accepts a frame of exactly the cap and refuses one byte more, cut anywhere', async () => {
    const { SseRelay } = await import('../../src/wire/sse-relay.js');
    for (const eol of ['\n', '\r\n']) {
      const overhead = Buffer.byteLength(`data: ${event('')}${eol}${eol}`);
      for (const extra of [0, 1]) {
        const bytes = Buffer.from(`data: ${event('x'.repeat(CAP - overhead + extra))}${eol}${eol}`);
        for (let cut = 0; cut <= bytes.length; cut++) {
          for (const second of [cut, Math.min(bytes.length, cut + 1), Math.min(bytes.length, cut + 3)]) {
            const relay = new SseRelay('chatcmpl-x', false, undefined, CAP);
            const out =
              relay.push(bytes.subarray(0, cut)) +
              relay.push(bytes.subarray(cut, second)) +
              relay.push(bytes.subarray(second));
            expect({ eol, extra, cut, second, refused: relay.invalidReason }).toEqual({
              eol,
              extra,
              cut,
              second,
              refused: extra === 0 ? null : 'frame_too_large',
            });
            expect(out).toBe(extra === 0 ? ours('x'.repeat(CAP - overhead)) : '');
          }
        }
      }
    }
  });
});

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
