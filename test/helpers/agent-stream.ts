/**
 * Generated model-server streams of the kinds agents meet: reasoning deltas, whole
 * tool calls (Ollama) and fragmented ones (vLLM), refusals, logprobs, every finish reason,
 * `content: null`, usage per chunk or at the end, an error event; strings with multi-byte
 * characters, emoji, lone surrogates and every escape, written the way different servers write
 * them (raw UTF-8, `\u` escapes in either case, Go's `\u003c`, `\/`). Each stream comes with what
 * the client must receive: its events with only the id replaced, the usage dropped unless asked.
 */
import fc from 'fast-check';
import { type Json, type Style, encodeJson } from './json-spellings.js';

export type Flavor = 'ollama' | 'ollama-old' | 'vllm';
/** Text that goes wrong when a relay mishandles bytes or escapes. */
export const trickyText = fc
  .array(
    fc.oneof(
      fc.string({ maxLength: 3 }),
      fc.string({ unit: 'binary', maxLength: 3 }),
      fc.integer({ min: 0xd800, max: 0xdfff }).map((c) => String.fromCharCode(c)),
      fc.constantFrom(
        '"',
        '\\',
        '\n',
        '\r\n',
        '\t',
        '\u0000',
        '\u001f',
        'é',
        'Zürich',
        '😀',
        '🌧',
        '👩‍💻',
        '\u2028',
        '\u2029',
        '<a>&',
        '/',
        '\\"',
        '\\n',
        '\\u00e9',
        '"content":"',
        '"usage":{',
        '\n\ndata: [DONE]\n\n',
        '}]}',
      ),
    ),
    { maxLength: 5 },
  )
  .map((ps) => ps.join(''));

/** Tool-call arguments: a JSON object's text (itself with tricky strings), as a model writes it. */
const argumentsText = fc
  .tuple(
    fc.dictionary(fc.constantFrom('city', 'q', 'note', 'é'), fc.oneof(trickyText, fc.integer(), fc.constant(null)), {
      maxKeys: 3,
    }),
    fc.constantFrom<Style>('raw', 'ascii', 'mixed'),
    fc.nat(),
  )
  .map(([obj, style, seed]) => {
    let n = seed;
    return encodeJson(obj as Json, style, () => (n = (n * 1103515245 + 12345) % 2147483648));
  });

/** A text cut into 1 to 6 fragments anywhere, even between a surrogate pair's halves. */
const fragmentsOf = (text: fc.Arbitrary<string>): fc.Arbitrary<string[]> =>
  fc.tuple(text, fc.array(fc.nat(), { maxLength: 5 })).map(([t, cuts]) => {
    const at = [...new Set(cuts.map((c) => c % (t.length + 1)))].sort((a, b) => a - b);
    const out: string[] = [];
    let from = 0;
    for (const c of [...at, t.length]) {
      out.push(t.slice(from, c));
      from = c;
    }
    return out;
  });

type Step =
  | { kind: 'role' }
  | { kind: 'content'; text: string }
  | { kind: 'content-null' }
  | { kind: 'reasoning'; key: 'reasoning' | 'reasoning_content'; text: string }
  | { kind: 'refusal'; text: string }
  | { kind: 'tool-whole'; calls: { name: string; args: string }[] }
  | { kind: 'tool-fragments'; index: number; name: string; fragments: string[] }
  | { kind: 'logprobs'; text: string }
  | { kind: 'finish'; reason: 'stop' | 'tool_calls' | 'length' | 'content_filter' };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.constant<Step>({ kind: 'role' }),
  trickyText.map((text): Step => ({ kind: 'content', text })),
  // Plain tokens, as most of a stream is: the layouts are learned and matched here.
  {
    arbitrary: fc.constantFrom('t0 ', 't1 ', 'Hello', ' world').map((text): Step => ({ kind: 'content', text })),
    weight: 4,
  },
  fc.constant<Step>({ kind: 'content-null' }),
  {
    arbitrary: fc
      .tuple(
        fc.constantFrom<'reasoning' | 'reasoning_content'>('reasoning', 'reasoning_content'),
        fc.oneof(trickyText, fc.constantFrom('r0 ', 'r1 ')),
      )
      .map(([key, text]): Step => ({ kind: 'reasoning', key, text })),
    weight: 3,
  },
  trickyText.map((text): Step => ({ kind: 'refusal', text })),
  fc
    .array(fc.record({ name: fc.constantFrom('get_weather', 'search'), args: argumentsText }), {
      minLength: 1,
      maxLength: 2,
    })
    .map((calls): Step => ({ kind: 'tool-whole', calls })),
  {
    arbitrary: fc
      .tuple(fc.nat(2), fc.constantFrom('get_weather', 'search'), fragmentsOf(argumentsText))
      .map(([index, name, fragments]): Step => ({ kind: 'tool-fragments', index, name, fragments })),
    weight: 2,
  },
  trickyText.map((text): Step => ({ kind: 'logprobs', text })),
  fc.constantFrom('stop', 'tool_calls', 'length', 'content_filter').map((reason): Step => ({ kind: 'finish', reason })),
);

export interface StreamCase {
  flavor: Flavor;
  upstreamId: string;
  /** The upstream's events (data payloads as written), in order, each a JSON text. */
  events: string[];
  /** How the stream ends: `[DONE]`, an error event, or the body just stops. */
  end: 'done' | 'error' | 'eof';
  /** The usage chunk before `[DONE]` (choices empty). */
  finalUsage: boolean;
  /** vLLM's continuous usage: a `usage` object on every chunk. */
  usageEveryChunk: boolean;
  /** Line ends: LF (Ollama, vLLM) or CRLF (sse-starlette servers). */
  eol: '\n' | '\r\n';
}

export const streamCase: fc.Arbitrary<StreamCase> = fc
  .record({
    flavor: fc.constantFrom<Flavor>('ollama', 'ollama-old', 'vllm'),
    idNo: fc.nat(999),
    created: fc.integer({ min: 1_763_870_000, max: 1_763_870_100 }),
    ticks: fc.array(fc.boolean(), { maxLength: 30 }),
    steps: fc.array(step, { minLength: 1, maxLength: 14 }),
    // Mostly one way per server, as real ones write; 'mixed' (escapes anywhere, keys too) now and then.
    styles: fc.array(fc.constantFrom<Style>('raw', 'raw', 'ascii', 'mixed'), { minLength: 1, maxLength: 3 }),
    seed: fc.nat(),
    end: fc.constantFrom<'done' | 'error' | 'eof'>('done', 'done', 'error', 'eof'),
    finalUsage: fc.boolean(),
    usageEveryChunk: fc.boolean(),
    spaced: fc.boolean(),
    eol: fc.constantFrom<'\n' | '\r\n'>('\n', '\n', '\n', '\r\n'),
  })
  .map((g) => {
    let n = g.seed;
    const pick = (): number => (n = (n * 1103515245 + 12345) % 2147483648) >> 8;
    const style = g.styles[g.idNo % g.styles.length] as Style;
    const upstreamId =
      g.flavor === 'vllm'
        ? `chatcmpl-${(g.idNo * 2_654_435_761).toString(16).padStart(8, '0')}${'a1b2c3d4'.repeat(3)}`
        : `chatcmpl-${g.idNo}`;
    const usageEveryChunk = g.flavor === 'vllm' && g.usageEveryChunk;
    // Python servers that write with json.dumps' default separators; a few streams only.
    const spaced = g.spaced && g.idNo % 4 === 0;
    let created = g.created;
    let tick = 0;
    const prompt = 7;
    let completion = 0;
    const events: string[] = [];
    const event = (delta: Record<string, Json>, finish: string | null = null, logprobs: Json = null): void => {
      if (g.ticks[tick++ % Math.max(1, g.ticks.length)] === true) created++;
      completion++;
      const choice: Record<string, Json> = { index: 0, delta };
      if (g.flavor === 'vllm') {
        choice.logprobs = logprobs;
        choice.finish_reason = finish;
        if (finish !== null) choice.stop_reason = pick() % 2 === 0 ? null : 128009;
      } else {
        if (logprobs !== null) choice.logprobs = logprobs;
        choice.finish_reason = finish;
      }
      const body: Record<string, Json> = {
        id: upstreamId,
        object: 'chat.completion.chunk',
        created,
        model: g.flavor === 'vllm' ? 'Qwen/Qwen3.6-35B-A3B' : 'qwen3.6:35b',
      };
      if (g.flavor !== 'vllm') body.system_fingerprint = 'fp_ollama';
      body.choices = [choice];
      if (usageEveryChunk)
        body.usage = { prompt_tokens: prompt, total_tokens: prompt + completion, completion_tokens: completion };
      events.push(encodeJson(body, style, pick, spaced));
    };
    // Older Ollama sends the role, and an empty content, on every chunk.
    const old = (d: Record<string, Json>): Record<string, Json> =>
      g.flavor === 'ollama-old' ? { role: 'assistant', ...('content' in d ? {} : { content: '' }), ...d } : d;
    for (const s of g.steps) {
      switch (s.kind) {
        case 'role':
          event({ role: 'assistant', content: '' });
          break;
        case 'content':
          event(old({ content: s.text }));
          break;
        case 'content-null':
          event(old({ content: null }));
          break;
        case 'reasoning':
          event(old({ [s.key]: s.text }));
          break;
        case 'refusal':
          event(old({ content: null, refusal: s.text }));
          break;
        case 'tool-whole':
          event(
            old({
              tool_calls: s.calls.map((c, index) => ({
                id: `call_${index}x${g.idNo}`,
                index,
                type: 'function',
                function: { name: c.name, arguments: c.args },
              })),
            }),
          );
          break;
        case 'tool-fragments':
          event({
            tool_calls: [
              {
                id: `chatcmpl-tool-${g.idNo}`,
                type: 'function',
                index: s.index,
                function: { name: s.name, arguments: '' },
              },
            ],
          });
          for (const f of s.fragments) event({ tool_calls: [{ index: s.index, function: { arguments: f } }] });
          break;
        case 'logprobs':
          event(old({ content: s.text }), null, {
            content: [
              {
                token: s.text,
                logprob: -0.3125,
                bytes: [...Buffer.from(s.text)].slice(0, 4),
                top_logprobs: [{ token: s.text, logprob: -0.3125, bytes: null }],
              },
            ],
          });
          break;
        case 'finish':
          event(g.flavor === 'ollama-old' ? { role: 'assistant', content: '' } : {}, s.reason);
          break;
      }
    }
    if (g.end === 'error')
      events.push(
        encodeJson(
          { error: { message: 'model runner has unexpectedly stopped', type: 'api_error', param: null, code: null } },
          style,
          pick,
          spaced,
        ),
      );
    else if (g.finalUsage) {
      const body: Record<string, Json> = {
        id: upstreamId,
        object: 'chat.completion.chunk',
        created,
        model: 'm',
        choices: [],
        usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
      };
      events.push(encodeJson(body, style, pick, spaced));
    }
    return {
      flavor: g.flavor,
      upstreamId,
      events,
      end: g.end,
      finalUsage: g.end !== 'error' && g.finalUsage,
      usageEveryChunk,
      eol: g.eol,
    } satisfies StreamCase;
  });

/** What the openai SDK takes for an error event (`if (data.error)`). */
const sdkThrowsOn = (error: unknown): boolean => ![undefined, null, false, 0, ''].includes(error as never);

/** The upstream's bytes: one `data:` line per event, then `[DONE]` when the stream ends so. */
export function upstreamBytes(c: StreamCase): Buffer {
  const blank = c.eol + c.eol;
  return Buffer.from(
    c.events.map((e) => `data: ${e}${blank}`).join('') + (c.end === 'done' ? `data: [DONE]${blank}` : ''),
  );
}

/** The model server's error event as the client gets it: our shape, its message, its code if a string. */
export function ourErrorEvent(error: unknown): unknown {
  const e = typeof error === 'object' && error !== null ? (error as Record<string, unknown>) : { message: error };
  const message = typeof e.message === 'string' && e.message !== '' ? e.message : 'an error event without a message';
  return {
    error: {
      message: `Model server error: ${message}`,
      type: 'api_error',
      code: typeof e.code === 'string' && e.code !== '' ? e.code : 'upstream_error',
      param: null,
    },
  };
}

/**
 * What the client must receive, as values: each event parsed, its id ours, the usage chunk
 * (choices empty) only when asked, a chunk's `usage` only when asked, an error event in our shape;
 * then `[DONE]`.
 */
export function expectedEvents(c: StreamCase, ours: string, forwardUsage: boolean): unknown[] {
  const out: unknown[] = [];
  for (const e of c.events) {
    const v = JSON.parse(e) as Record<string, unknown>;
    if (sdkThrowsOn(v.error)) {
      out.push(ourErrorEvent(v.error));
      continue;
    }
    const usage = typeof v.usage === 'object' && v.usage !== null;
    if (usage && Array.isArray(v.choices) && v.choices.length === 0 && !forwardUsage) continue;
    if (usage && !forwardUsage) delete v.usage;
    out.push({ ...v, id: ours });
  }
  if (c.end === 'done') out.push('[DONE]');
  return out;
}

/**
 * The bytes the client must receive for each event, where they are fixed: an ordinary event whose
 * id is its first key and has no escapes leaves as it came with only the id's text replaced
 * (null: only its value is fixed, by `expectedEvents`).
 */
export function expectedTexts(c: StreamCase, ours: string, forwardUsage: boolean): (string | null)[] {
  const out: (string | null)[] = [];
  for (const e of c.events) {
    const v = JSON.parse(e) as Record<string, unknown>;
    if (sdkThrowsOn(v.error)) {
      out.push(JSON.stringify(ourErrorEvent(v.error)));
      continue;
    }
    const usage = typeof v.usage === 'object' && v.usage !== null;
    if (usage && Array.isArray(v.choices) && v.choices.length === 0 && !forwardUsage) continue;
    const simple = /^\{"id":"[ -!#-[\]-~]{1,128}"/.exec(e);
    out.push(simple !== null && !(usage && !forwardUsage) ? `{"id":"${ours}${e.slice(simple[0].length - 1)}` : null);
  }
  if (c.end === 'done') out.push('[DONE]');
  return out;
}

/** The client's bytes as event texts (the `data:` payloads); throws on anything but one data line per event. */
export function clientTexts(text: string): string[] {
  if (text === '') return [];
  if (!text.endsWith('\n\n')) throw new Error(`the client's bytes end mid-event: ${JSON.stringify(text.slice(-40))}`);
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((frame) => {
      if (!frame.startsWith('data: ') || frame.includes('\n'))
        throw new Error(`not one data line: ${JSON.stringify(frame.slice(0, 80))}`);
      return frame.slice(6);
    });
}

/** The client's bytes as events: each `data:` payload parsed (`[DONE]` as is); throws on anything else. */
export function clientEvents(text: string): unknown[] {
  return clientTexts(text).map((data) => (data === '[DONE]' ? data : (JSON.parse(data) as unknown)));
}

/** Cut points for `bytes`, from random seeds: where the TCP reads end. */
export function cutsOf(seeds: number[], length: number): number[] {
  return [...new Set(seeds.map((c) => 1 + (c % Math.max(1, length - 1))))].sort((a, b) => a - b);
}
