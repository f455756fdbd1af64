import type { Clock } from '../../src/clock.js';
import type { IdSource, ResponseContext } from '../../src/wire/responses-object.js';
import { responsesToChat } from '../../src/wire/responses-to-chat.js';

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

/** A chat stream chunk as Ollama writes it (protocol.md §1.4). */
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
