import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalLiteralEnd, canonicalNumberEnd } from '../../src/wire/json-bytes.js';
import { ResponsesStreamRelay } from '../../src/apis/responses/event-relay.js';
import { ResponsesLayouts } from '../../src/apis/responses/server-layouts.js';
import { runResponsesRelay } from '../helpers/responses-relay-run.js';

/**
 * The Responses relay's server layouts (apis/responses/layouts.ts) against its parsed path: for any
 * run of streams from one model server, cut into reads anywhere, the relay that learns layouts
 * and the one that parses every event send the same bytes and end the same way. The events are
 * a whole Ollama stream (keys sorted), with any text and numbers, and hostile forms mixed in:
 * whitespace, numbers and strings JSON.stringify writes otherwise, a repeated or integer key,
 * an escaped id, bytes that are not UTF-8, CRLF, an event name that is not the type.
 */

type Json = Record<string, unknown>;

function sorted(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(sorted).join(',')}]`;
  if (typeof v === 'object' && v !== null)
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${sorted((v as Json)[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}

const HOSTILE: ((json: string) => string)[] = [
  (j) => j.replace(':', ': '),
  (j) => j.replace(/"temperature":(-?[0-9.e+-]+)/, '"temperature":$1.0'),
  (j) => j.replace(/"created_at":(\d+)/, '"created_at":$1e0'),
  (j) => j.replace('"model":"', '"model":"\\u0067'),
  (j) => j.replace('"model":"gemma4', '"model":"gemma4\\/'),
  (j) => j.replace('{"response":{', '{"response":{"status":"x",'),
  (j) => j.replace(/\}(,"sequence_number")/, ',"1":0}$1'),
  (j) => j.replace('"id":"resp_', '"id":"resp\\u005f'),
  (j) => j.replace('"output_index":0', '"output_index":-0'),
  (j) => j.replace('"text":"', '"text":"\\u0001'),
];

const textArb = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 10 }),
  fc.constantFrom('t0 ', '', '"', '\\', '\n', 'Grüße 🌧', '\u2028', '/'),
);
const numberArb = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true }),
  fc.constantFrom(0.1 + 0.2, 1e-7, 0.000001, 1e21, 123456789012345680000, 0.5, 1),
);

interface StreamShape {
  texts: string[];
  temperature: number;
  createdAt: number;
  usage: number;
  /** The frame made hostile, and how. */
  hostile: [number, number] | null;
  form: 'plain' | 'crlf' | 'name' | 'latin1';
}

/** One stream's frames, as Ollama sends them, one of them maybe hostile. */
function streamBytes({ texts, temperature, createdAt, usage, hostile, form }: StreamShape): Buffer {
  const frames: string[] = [];
  const ev = (type: string, data: Json) => frames.push(sorted({ ...data, type, sequence_number: frames.length }));
  const response = (status: string, output: Json[], used: number | null): Json => ({
    id: 'resp_upstream',
    object: 'response',
    created_at: createdAt,
    status,
    model: 'gemma4:26b',
    output,
    temperature,
    tools: [],
    usage:
      used === null
        ? null
        : {
            input_tokens: 24,
            output_tokens: used,
            total_tokens: 24,
            output_tokens_details: { reasoning_tokens: used },
          },
  });
  const ids = { output_index: 0, item_id: 'msg_1', content_index: 0 };
  const text = texts.join('');
  const message = (status: string, content: Json[]) => ({ id: 'msg_1', type: 'message', status, content });
  ev('response.created', { response: response('in_progress', [], null) });
  ev('response.in_progress', { response: response('in_progress', [], null) });
  ev('response.output_item.added', { output_index: 0, item: message('in_progress', []) });
  for (const t of texts) ev('response.output_text.delta', { ...ids, delta: t, logprobs: [] });
  ev('response.output_text.done', { ...ids, text, logprobs: [] });
  ev('response.output_item.done', { output_index: 0, item: message('completed', [{ type: 'output_text', text }]) });
  ev('response.completed', { response: response('completed', [message('completed', [])], usage) });
  const bytes = frames.map((json, i) => {
    const type = (JSON.parse(json) as Json).type as string;
    let data = json;
    let name = type;
    let end = '\n\n';
    if (hostile !== null && (hostile[0] === i || (hostile[0] === 99 && i === frames.length - 1))) {
      data = (HOSTILE[hostile[1]] as (j: string) => string)(data);
      if (form === 'crlf') end = '\r\n\r\n';
      if (form === 'name') name = 'message';
      if (form === 'latin1')
        return Buffer.from(`event: ${name}\ndata: ${data.replace('"model":"', '"model":"\xff')}${end}`, 'latin1');
    }
    return Buffer.from(`event: ${name}\ndata: ${data}${end}`, 'utf8');
  });
  return Buffer.concat(bytes);
}

const shapeArb = fc.record({
  texts: fc.array(textArb, { maxLength: 5 }),
  temperature: numberArb,
  createdAt: fc.nat(),
  usage: fc.oneof(fc.nat({ max: 5000 }), fc.constantFrom(-1, 1.5, 2 ** 60)),
  // Often one that carries the response (0, 1, the last: 99), whose parsed path encodes it again.
  hostile: fc.option(
    fc.tuple(fc.oneof(fc.constantFrom(0, 1, 99), fc.nat({ max: 13 })), fc.nat({ max: HOSTILE.length - 1 })),
    { freq: 2 },
  ),
  form: fc.oneof(fc.constant('plain' as const), fc.constantFrom('crlf' as const, 'name' as const, 'latin1' as const)),
});

const run = runResponsesRelay;

describe("the Responses relay: a server's learned layouts and the parsed path", () => {
  it('send the same bytes and end the same way, stream after stream, however each is cut', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(shapeArb, fc.array(fc.nat(), { maxLength: 6 })), { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        (shapes, sameHostile) => {
          const layouts = new ResponsesLayouts();
          // The same hostile frame in every stream, at times: a layout learned from it meets it again.
          const first = (shapes[0] as [StreamShape, number[]])[0];
          shapes.forEach(([shape, cuts], k) => {
            const stream = streamBytes(sameHostile ? { ...shape, hostile: first.hostile, form: first.form } : shape);
            const id = `resp_ours_${k}`;
            const fast = run(new ResponsesStreamRelay(id, 1 << 16, undefined, true, layouts), stream, cuts);
            const slow = run(new ResponsesStreamRelay(id, 1 << 16, undefined, false, null), stream, cuts);
            expect(fast).toEqual(slow);
          });
        },
      ),
      { numRuns: 300 },
    );
  });

  it("a stream after the first is sent by the server's layouts, our id spliced in", () => {
    const shape = { temperature: 0.7, createdAt: 1_700_000_000, usage: 40, hostile: null, form: 'plain' } as const;
    const stream = streamBytes({ ...shape, texts: ['t0 ', 'Grüße 🌧', '"\\'] });
    const layouts = new ResponsesLayouts();
    run(new ResponsesStreamRelay('resp_a', 1 << 16, undefined, true, layouts), stream, []);
    expect(layouts.size).toBeGreaterThanOrEqual(5);
    const other = streamBytes({ ...shape, texts: ['more ', 'text'], createdAt: 1_700_000_100, usage: 7 });
    const relay = new ResponsesStreamRelay('resp_b', 1 << 16, undefined, true, layouts);
    const parse = JSON.parse;
    let parsed = 0;
    JSON.parse = ((text: string) => {
      parsed++;
      return parse(text) as unknown;
    }) as typeof JSON.parse;
    try {
      const got = run(relay, other, [50, 700]);
      JSON.parse = parse;
      expect(parsed).toBe(0);
      expect(got).toEqual(run(new ResponsesStreamRelay('resp_b', 1 << 16, undefined, false), other, []));
      expect(got.bytes).toContain('"id":"resp_b"');
      expect(got.done).toBe(true);
      expect(got.counts).toEqual({ prompt: 24, completion: 7, reasoning: 7 });
    } finally {
      JSON.parse = parse;
    }
  });

  it('takes as canonical only what JSON.stringify writes as it is', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.double().map(String),
          fc.integer().map(String),
          fc.stringMatching(/^-?(0|[1-9][0-9]{0,20})(\.[0-9]{1,20})?([eE][+-]?[0-9]{1,3})?$/),
        ),
        (text) => {
          const b = Buffer.from(`${text},`);
          if (canonicalNumberEnd(b, 0, b.length) === text.length) expect(String(Number(text))).toBe(text);
        },
      ),
      { numRuns: 400 },
    );
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 12 }), fc.boolean(), (s, raw) => {
        const lit = raw ? `"${s.replace(/"/g, '')}"` : JSON.stringify(s);
        const b = Buffer.from(`${lit},`);
        if (canonicalLiteralEnd(b, 0, b.length) === b.length - 1)
          expect(JSON.stringify(JSON.parse(lit) as string)).toBe(lit);
      }),
      { numRuns: 400 },
    );
    const canonical = (t: string) => canonicalNumberEnd(Buffer.from(t), 0, t.length) === t.length;
    expect(['1', '-5', '0', '0.5', '1.25', '0.000001', '123456789012345'].every(canonical)).toBe(true);
    expect(['-0', '1.0', '1e5', '0.0000001', '1234567890123456', '01'].some(canonical)).toBe(false);
  });
});
