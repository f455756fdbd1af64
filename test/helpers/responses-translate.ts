import type { Clock } from '../../src/clock.js';
import type { IdSource, ResponseContext } from '../../src/apis/responses/object.js';
import { responsesToChat } from '../../src/apis/responses/to-chat.js';

/** Fixed time for translated answers: created_at 1_700_000_000, completed_at 1_700_000_007. */
export const CREATED_AT = 1_700_000_000;
export const fixedClock: Clock = { now: () => (CREATED_AT + 7) * 1000 + 250 };

/** Ids counted per kind: msg_1, rs_1, fc_1, fc_2, call_1, … */
export function countingIds(): IdSource {
  const n = { msg: 0, rs: 0, fc: 0, call: 0 };
  return (kind) => `${kind}_${++n[kind]}`;
}

/** The context of a translated answer to `request` (a Responses request body). */
export function contextFor(request: Record<string, unknown>, ids: IdSource = countingIds()): ResponseContext {
  return {
    responseId: 'resp_test',
    model: 'gemma4:26b',
    echo: responsesToChat(request).echo,
    createdAt: CREATED_AT,
    clock: fixedClock,
    ids,
  };
}

type Json = Record<string, unknown>;

/** A chat completion as Ollama writes it on /v1/chat/completions. */
export function completion(message: Json, finish: string | null, u: Json | undefined): Json {
  return {
    id: 'chatcmpl-417',
    object: 'chat.completion',
    created: 1755800000,
    model: 'gemma4:26b',
    system_fingerprint: 'fp_ollama',
    choices: [{ index: 0, message: { role: 'assistant', ...message }, finish_reason: finish }],
    ...(u === undefined ? {} : { usage: u }),
  };
}

/** A chat stream chunk as Ollama writes it on /v1/chat/completions. */
export function chunk(delta: Record<string, unknown>, finish: string | null = null): Record<string, unknown> {
  return {
    id: 'chatcmpl-417',
    object: 'chat.completion.chunk',
    created: 1755800000,
    model: 'gemma4:26b',
    system_fingerprint: 'fp_ollama',
    choices: [{ index: 0, delta, finish_reason: finish }],
  };
}

export function usageChunk(prompt: number, completion: number): Record<string, unknown> {
  return {
    id: 'chatcmpl-417',
    object: 'chat.completion.chunk',
    created: 1755800000,
    model: 'gemma4:26b',
    choices: [],
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
  };
}

/** Parses `event: <type>\ndata: <json>\n\n` frames; throws on anything else. */
export function parseFrames(text: string): { type: string; data: Record<string, unknown> }[] {
  if (text === '') return [];
  if (!text.endsWith('\n\n'))
    throw new Error(`frames do not end with a blank line: ${JSON.stringify(text.slice(-40))}`);
  return text
    .slice(0, -2)
    .split('\n\n')
    .map((frame) => {
      const m = /^event: ([a-z_.]+)\ndata: (.*)$/s.exec(frame);
      if (m === null) throw new Error(`not an event frame: ${JSON.stringify(frame)}`);
      const data = JSON.parse(m[2] as string) as Record<string, unknown>;
      if (data.type !== m[1]) throw new Error(`event ${m[1]} carries type ${String(data.type)}`);
      return { type: m[1] as string, data };
    });
}

/** The chat stream a model server would send for `message` (one chat completion's), its text cut at `cuts`. */
export function streamOf(message: Json, finish: string, u: Json, cuts: number[]): unknown[] {
  const split = (s: string): string[] => {
    const at = [...new Set(cuts.map((c) => c % (s.length + 1)))].sort((x, y) => x - y);
    const pieces: string[] = [];
    let from = 0;
    for (const c of at) {
      if (c > from) pieces.push(s.slice(from, c));
      from = Math.max(from, c);
    }
    if (from < s.length) pieces.push(s.slice(from));
    return pieces;
  };
  const out: unknown[] = [chunk({ role: 'assistant', content: '' })];
  for (const p of split((message.reasoning as string | undefined) ?? '')) out.push(chunk({ reasoning: p }));
  for (const p of split((message.content as string | undefined) ?? '')) out.push(chunk({ content: p }));
  const calls = (message.tool_calls as Json[] | undefined) ?? [];
  calls.forEach((c, index) => {
    const fn = c.function as Json;
    const [first, ...rest] = split(fn.arguments as string);
    out.push(
      chunk({
        tool_calls: [{ index, id: c.id, type: 'function', function: { name: fn.name, arguments: first ?? '' } }],
      }),
    );
    for (const p of rest) out.push(chunk({ tool_calls: [{ index, function: { arguments: p } }] }));
  });
  out.push(chunk({}, finish));
  out.push({ choices: [], usage: u });
  return out;
}
