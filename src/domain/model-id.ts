/**
 * The model ids of docs/contract.md §2.3: the allowed list until the operator gives another, with
 * OB_PROXY_MODELS at start or `ob-proxy models` at run time (which the store then keeps).
 */
export const DEFAULT_MODELS = ['gemma4:26b', 'qwen3.6:27b'] as const;

export function parseModelList(value: string | undefined): string[] | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  return value
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m !== '');
}

/** The longest model id a name given by an operator (an alias) may be. */
export const MODEL_ID_MAX = 200;

/**
 * What a model id given by an operator may hold: the ids agents and model servers send
 * (`claude-sonnet-4-5`, `qwen3.6:27b`, `Qwen/Qwen2.5-7B-Instruct`, `claude-3-5-sonnet-v2@20241022`,
 * `hf.co/user/repo:Q4_K_M`). No spaces, quotes or control characters: the id is compared byte
 * for byte with a request's `model`, and shown in tables, logs and the console.
 */
export const MODEL_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$/;

/** The rule MODEL_ID_RE and MODEL_ID_MAX make, in words, for refusals. */
export const MODEL_ID_RULE = `1-${MODEL_ID_MAX} characters: letters, digits, and . _ : / @ + - (not first)`;

export function isModelId(value: unknown): value is string {
  return typeof value === 'string' && value.length <= MODEL_ID_MAX && MODEL_ID_RE.test(value);
}
