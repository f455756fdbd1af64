/**
 * More choices than this and an answer is not a chat completion for us: a request asks for one
 * (`n` must be 1, apis/chat/request.ts), and OpenAI's own `n` stops at 128. Each choice is filled in
 * to the shape of docs/contract.md §3.3, so a 4 MB answer of two million `0`s was written back as 165 MB, and
 * one within the 32 MiB cap took 14 s of the event loop and 2 GB of heap before it failed.
 */
export const MAX_CHOICES = 128;

/**
 * Guarantees the shape of docs/contract.md §3.3 on a model server's non-streaming answer: our own id, the
 * `chat.completion` object, integer `created`, the model, and choices with index, assistant
 * role, content and finish_reason. Content is a string, or null where the server sent null (a
 * turn that only calls tools, as OpenAI sends it too). Other fields the server sent are kept.
 * Returns null when the answer is not a chat completion at all (no `choices`, or more than MAX_CHOICES).
 */
export function normalizeCompletion(
  raw: unknown,
  id: string,
  model: string,
  nowSec: number,
): Record<string, unknown> | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return null;
  const body = raw as Record<string, unknown>;
  if (!Array.isArray(body.choices) || body.choices.length > MAX_CHOICES) return null;
  const choices = body.choices.map((c: unknown, i) => {
    const choice = (typeof c === 'object' && c !== null ? c : {}) as Record<string, unknown>;
    const message = (typeof choice.message === 'object' && choice.message !== null ? choice.message : {}) as Record<
      string,
      unknown
    >;
    return {
      ...choice,
      index: typeof choice.index === 'number' ? choice.index : i,
      message: {
        ...message,
        role: typeof message.role === 'string' ? message.role : 'assistant',
        content: typeof message.content === 'string' || message.content === null ? message.content : '',
      },
      finish_reason: choice.finish_reason ?? null,
    };
  });
  return {
    ...body,
    id,
    object: 'chat.completion',
    created: Number.isSafeInteger(body.created) ? body.created : nowSec,
    model: typeof body.model === 'string' && body.model !== '' ? body.model : model,
    choices,
  };
}

/**
 * The most tokens one exchange can report for its prompt, its completion or its reasoning. Far
 * above any model's context (ten million at most today), and low enough that a key's lifetime
 * counters stay whole numbers (a safe integer, a PostgreSQL bigint) for 90 million such exchanges.
 */
export const MAX_EXCHANGE_TOKENS = 100_000_000;

/**
 * A count the model server reported, as a token count, or null when it is none: a whole number
 * from 0 to MAX_EXCHANGE_TOKENS. Everything a count reaches adds it up (the key's counters
 * flushed to the store, its tokens-per-minute window, the metrics, `ob-proxy usage`), so a
 * string was concatenated there, 1e308 twice became Infinity (written as null), a fraction or a
 * sum past 2^53 was written as no store accepts on load, and a negative count took tokens off.
 */
export function tokenCount(v: unknown): number | null {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0 && v <= MAX_EXCHANGE_TOKENS ? v : null;
}

/** `completion_tokens_details.reasoning_tokens` of a reported usage (OpenAI's; Ollama and vLLM send none), or null. */
export function reasoningCount(usage: unknown): number | null {
  const d = (usage as { completion_tokens_details?: unknown } | null | undefined)?.completion_tokens_details;
  return typeof d === 'object' && d !== null
    ? tokenCount((d as { reasoning_tokens?: unknown }).reasoning_tokens)
    : null;
}

/**
 * What a plain answer's usage counts: each count as tokenCount takes it; the prompt and
 * completion null where they are not one (the caller estimates them: prompt-estimate.ts), the
 * reasoning 0.
 */
export function usageOf(body: Record<string, unknown>): {
  prompt: number | null;
  completion: number | null;
  reasoning: number;
} {
  const u = body.usage as { prompt_tokens?: unknown; completion_tokens?: unknown } | null | undefined;
  return {
    prompt: tokenCount(u?.prompt_tokens),
    completion: tokenCount(u?.completion_tokens),
    reasoning: reasoningCount(u) ?? 0,
  };
}

/**
 * `value` as JSON, or null where it nests too deeply to be encoded again: JSON.parse takes any
 * depth, JSON.stringify overflows the stack at a few thousand levels (a RangeError). An answer
 * relayed as its own bytes is never encoded again; one that must be is refused with this null.
 */
export function encodeJson(value: unknown): string | null {
  try {
    return JSON.stringify(value);
  } catch {
    return null;
  }
}
