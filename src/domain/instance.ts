import { obError } from '../errors.js';

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
