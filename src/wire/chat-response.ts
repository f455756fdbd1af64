/**
 * Guarantees the SPEC 2.5 shape on a model server's non-streaming answer: our own id, the
 * `chat.completion` object, integer `created`, the model, and choices with index, assistant
 * role, content and finish_reason. Content is a string, or null where the server sent null (a
 * turn that only calls tools, as OpenAI sends it too). Other fields the server sent are kept.
 * Returns null when the answer is not a chat completion at all.
 */
export function normalizeCompletion(
  raw: unknown,
  id: string,
  model: string,
  nowSec: number,
): Record<string, unknown> | null {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return null;
  const body = raw as Record<string, unknown>;
  if (!Array.isArray(body.choices)) return null;
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

export function usageOf(body: Record<string, unknown>): { prompt: number; completion: number; reasoning: number } {
  const u = body.usage as
    | {
        prompt_tokens?: unknown;
        completion_tokens?: unknown;
        completion_tokens_details?: { reasoning_tokens?: unknown } | null;
      }
    | undefined;
  const n = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0);
  return {
    prompt: n(u?.prompt_tokens),
    completion: n(u?.completion_tokens),
    reasoning: n(u?.completion_tokens_details?.reasoning_tokens),
  };
}
