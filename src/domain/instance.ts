import { obError } from '../errors.js';
import { clipped } from '../printable.js';
import { MODEL_ID_RULE, isModelId } from './model-id.js';
import { looksLikeSecret } from './secret-shape.js';

export const INSTANCE_STATES = ['pending', 'ready', 'stopped', 'failed', 'terminated'] as const;
export type InstanceState = (typeof INSTANCE_STATES)[number];

export interface Instance {
  id: string;
  /**
   * Internal, never reused: a new one each time an instance is added, so an id removed and added
   * again is another deployment, and the keys of the old one answer 404 for ever.
   */
  deployment: string;
  model: string;
  /** The model server's base URL (Ollama's root); null until given. */
  endpoint: string | null;
  state: InstanceState;
  packEndsAt: string | null;
  /**
   * A file holding the model server's bearer token (vLLM --api-key), read by the daemon into
   * memory; the store keeps only the path. Absent or null: no token is sent.
   */
  upstreamTokenFile?: string | null;
  /**
   * Other model ids a key of this instance may send as `model` (an agent's own, such as Claude
   * Code's); the model server still receives `model`. Stores written before aliases existed hold
   * none: their records are given [] as they are loaded or heard (withAliases).
   */
  aliases: readonly string[];
  createdAt: string;
  updatedAt: string;
}

/** Commands that move an instance, and the states each may start from. */
export type InstanceAction = 'ready' | 'pending' | 'stop' | 'fail' | 'terminate';

const TARGET: Record<InstanceAction, InstanceState> = {
  ready: 'ready',
  pending: 'pending',
  stop: 'stopped',
  fail: 'failed',
  terminate: 'terminated',
};

// Terminated is final: its keys are revoked for ever and its id cannot be brought back.
// Stopped and failed instances may be made ready again (a restart); they get a new default key.
const ALLOWED_FROM: Record<InstanceAction, readonly InstanceState[]> = {
  ready: ['pending', 'stopped', 'failed'],
  pending: ['ready'],
  stop: ['pending', 'ready'],
  fail: ['pending', 'ready', 'stopped'],
  terminate: ['pending', 'ready', 'stopped', 'failed'],
};

/** Throws invalid_transition with a sentence that says what is possible instead. */
export function assertTransition(instance: Instance, action: InstanceAction): InstanceState {
  const allowed = ALLOWED_FROM[action];
  if (!allowed.includes(instance.state)) {
    throw obError('invalid_transition', {
      message: `Instance ${instance.id} is ${instance.state}; "${action}" works only from ${allowed.join(', ')}.`,
    });
  }
  return TARGET[action];
}

/** Actions that revoke every key of the instance, and the reason recorded. */
export const REVOKING_ACTIONS = {
  stop: 'instance_stopped',
  fail: 'instance_failed',
  terminate: 'instance_terminated',
} as const satisfies Partial<Record<InstanceAction, string>>;

/**
 * An endpoint as a refusal may quote it: what stands before an @ (a user and password) and after
 * a ? (a token) left out, and at most 200 characters.
 */
function withoutCredentials(raw: string): string {
  // Up to the last @: a password may hold any character, / ? # included.
  const shown = raw.replace(/^([a-z][a-z0-9+.-]*:\/\/)?.*@/is, '$1…@').replace(/[?#].*$/s, '?…');
  return shown.length > 200 ? `${shown.slice(0, 200)}…` : shown;
}

/** A trailing /v1 in an endpoint means the same server: keep the root. */
export function normalizeEndpoint(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw obError('invalid_argument', {
      param: 'endpoint',
      message: `Endpoint "${withoutCredentials(raw)}" is not a URL; give the model server's base URL, e.g. http://10.0.0.5:11434.`,
    });
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw obError('invalid_argument', {
      param: 'endpoint',
      message: `Endpoint must be http:// or https://, got "${url.protocol}".`,
    });
  }
  if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
    throw obError('invalid_argument', {
      param: 'endpoint',
      message: 'Endpoint must be a plain base URL without credentials, query or fragment.',
    });
  }
  let path = url.pathname.replace(/\/+$/, '');
  if (path.endsWith('/v1')) path = path.slice(0, -3);
  return `${url.protocol}//${url.host}${path}`;
}

/** The most aliases an instance may have: an agent sends a few model ids, not hundreds. */
export const ALIASES_MAX = 32;

/**
 * A record as the registry holds it. One written by a daemon older than aliases, heard from a
 * shared store, lacks the field the type promises: it is given none.
 */
export function withAliases(inst: Instance): Instance {
  return Array.isArray(inst.aliases) ? inst : { ...inst, aliases: [] };
}

/** `instances alias`: `add` names aliases, `remove` takes some away, `clear` takes them all away. */
export interface AliasChange {
  add?: unknown;
  remove?: unknown;
  clear?: unknown;
}

function aliasList(value: unknown, param: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string'))
    throw obError('invalid_argument', { param, message: `${param} must be a list of model ids.` });
  return value as string[];
}

function checkAlias(inst: Instance, alias: string): string {
  if (!isModelId(alias))
    throw obError('invalid_argument', {
      param: 'aliases',
      message: `Alias "${clipped(alias)}" is not a model id: ${MODEL_ID_RULE}. Give the id the agent sends as model, e.g. claude-sonnet-4-5.`,
    });
  // An alias is stored, logged and shown in clear, as an id is.
  if (looksLikeSecret(alias))
    throw obError('invalid_argument', {
      param: 'aliases',
      message:
        "An alias must not look like a key's secret (ob_sk_…, in any case): aliases are stored and shown in clear.",
    });
  if (alias === inst.model)
    throw obError('invalid_argument', {
      param: 'aliases',
      message: `"${alias}" is the model of instance ${inst.id} itself: its keys send it already. An alias names another model id.`,
    });
  return alias;
}

/**
 * The aliases after a change: all of them taken away (`clear`) or some (`remove`, each one the
 * instance has), then `add`ed, each once, in the order given. Throws invalid_argument, naming
 * what to do, and changes nothing, for an alias that is not a model id, the instance's own model,
 * an alias to remove that it does not have, or more than ALIASES_MAX in all.
 */
export function changeAliases(inst: Instance, change: AliasChange): string[] {
  const add = aliasList(change.add, 'add');
  const remove = aliasList(change.remove, 'remove');
  if (change.clear !== undefined && change.clear !== null && typeof change.clear !== 'boolean')
    throw obError('invalid_argument', { param: 'clear', message: 'clear must be true or false.' });
  const clear = change.clear === true;
  if (clear && remove.length > 0)
    throw obError('invalid_argument', {
      param: 'remove',
      message: 'Give either --clear or --remove, not both: --clear takes every alias away.',
    });
  const missing = remove.filter((a) => !inst.aliases.includes(a));
  if (missing.length > 0)
    throw obError('invalid_argument', {
      param: 'remove',
      message: `Instance ${inst.id} has no alias "${clipped(missing[0]!)}"; ${inst.aliases.length === 0 ? 'it has none' : `its aliases are ${inst.aliases.join(', ')}`}. Nothing was changed.`,
    });
  const next = clear ? [] : inst.aliases.filter((a) => !remove.includes(a));
  for (const alias of add) if (!next.includes(checkAlias(inst, alias))) next.push(alias);
  if (next.length > ALIASES_MAX)
    throw obError('invalid_argument', {
      param: 'aliases',
      message: `Instance ${inst.id} would have ${next.length} aliases; it may have at most ${ALIASES_MAX}. Take some away with --remove, or all with --clear.`,
    });
  return next;
}
