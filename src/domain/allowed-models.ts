import { obError } from '../errors.js';
import { clipped } from '../printable.js';
import type { Instance } from './instance.js';
import { MODEL_ID_RULE, isModelId } from './model-id.js';
import { looksLikeSecret } from './secret-shape.js';

/**
 * The most model ids the allowed list may hold: it is shown whole by `models list`, in every
 * refusal of an unknown model, and written with every change of it.
 */
export const ALLOWED_MODELS_MAX = 256;

/** `models allow` / `models disallow`: the ids to add to the list, and those to take away. */
export interface ModelsChange {
  allow?: unknown;
  disallow?: unknown;
}

function idList(value: unknown, param: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string'))
    throw obError('invalid_argument', { param, message: `${param} must be a list of model ids.` });
  return value as string[];
}

function checkId(id: string, param: string): string {
  if (!isModelId(id))
    throw obError('invalid_argument', {
      param,
      message: `"${clipped(id)}" is not a model id: ${MODEL_ID_RULE}. Give the id as the model server lists it, e.g. llama3.1:8b.`,
    });
  // The list is stored, logged and shown in clear.
  if (looksLikeSecret(id))
    throw obError('invalid_argument', {
      param,
      message: "A model id must not look like a key's secret (ob_sk_…, in any case): model ids are shown in clear.",
    });
  return id;
}

/** Instances that keep a model in use: every one but a terminated one may serve again. */
export function instancesUsing(instances: Iterable<Instance>, model: string): string[] {
  const ids: string[] = [];
  for (const i of instances) if (i.model === model && i.state !== 'terminated') ids.push(i.id);
  return ids.sort();
}

/**
 * The allowed list after a change: the ids to disallow taken away (each one the list has, and
 * none an instance that is not terminated runs), then those to allow added, each once, in the
 * order given. Throws, naming what to do and changing nothing, for an id that is not a model id,
 * one given to both, one to take away that the list lacks or that is in use, or a list that
 * would be empty or longer than ALLOWED_MODELS_MAX.
 */
export function changeAllowedModels(
  current: readonly string[],
  change: ModelsChange,
  instances: Iterable<Instance>,
): string[] {
  const allow = idList(change.allow, 'allow').map((id) => checkId(id, 'allow'));
  const disallow = idList(change.disallow, 'disallow').map((id) => checkId(id, 'disallow'));
  const both = allow.find((id) => disallow.includes(id));
  if (both !== undefined)
    throw obError('invalid_argument', {
      param: 'disallow',
      message: `${both} is both to allow and to disallow; give it once. Nothing was changed.`,
    });
  const missing = disallow.find((id) => !current.includes(id));
  if (missing !== undefined)
    throw obError('invalid_argument', {
      param: 'disallow',
      message: `${missing} is not on the allowed list (${current.join(', ')}). Nothing was changed.`,
    });
  const all = [...instances];
  for (const id of disallow) {
    const using = instancesUsing(all, id);
    if (using.length > 0)
      throw obError('model_in_use', {
        message: `${id} cannot be disallowed: instance${using.length === 1 ? '' : 's'} ${using.join(', ')} ${using.length === 1 ? 'runs' : 'run'} it. Terminate or remove ${using.length === 1 ? 'it' : 'them'} first (\`ob-proxy instances terminate ID\`). Nothing was changed.`,
      });
  }
  const next = current.filter((id) => !disallow.includes(id));
  for (const id of allow) if (!next.includes(id)) next.push(id);
  if (next.length === 0)
    throw obError('invalid_argument', {
      param: 'disallow',
      message: 'The allowed list would be empty, and no instance could be added. Allow another model first.',
    });
  if (next.length > ALLOWED_MODELS_MAX)
    throw obError('invalid_argument', {
      param: 'allow',
      message: `The allowed list would hold ${next.length} models; it may hold at most ${ALLOWED_MODELS_MAX}. Disallow some first.`,
    });
  return next;
}

/** Whether two lists hold the same ids in the same order (a change that changes nothing writes nothing). */
export function sameModels(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((m, i) => m === b[i]);
}
