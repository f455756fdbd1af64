/** The model ids of docs/contract.md §2.3. The operator may replace them with OB_PROXY_MODELS. */
export const DEFAULT_MODELS = ['gemma4:26b', 'qwen3.6:27b'] as const;

export function parseModelList(value: string | undefined): string[] | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  return value
    .split(',')
    .map((m) => m.trim())
    .filter((m) => m !== '');
}
