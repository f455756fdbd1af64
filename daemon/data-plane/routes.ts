/**
 * Every route the public port serves, said once: the not-found answers name them from here, a
 * test holds the listener's registrations to it (test/unit/data-plane-routes.test.ts), and the
 * doc pages that list routes are held to it too, so a route cannot be added, dropped or renamed
 * in one place alone. `family`: which API a route belongs to, for the not-found answer of its
 * prefix; `doc`: the path as the docs write it (`{model}` for a parameter).
 */
export interface DataPlaneRoute {
  readonly method: 'GET' | 'POST' | 'HEAD';
  readonly path: string;
  readonly family: 'openai' | 'anthropic' | 'ollama' | 'probe';
}

export const DATA_PLANE_ROUTES: readonly DataPlaneRoute[] = [
  { method: 'POST', path: '/v1/chat/completions', family: 'openai' },
  { method: 'POST', path: '/v1/responses', family: 'openai' },
  // The Responses API's WebSocket mode: an upgrade only (socket-upgrade.ts).
  { method: 'GET', path: '/v1/responses', family: 'openai' },
  // Refused, 404 route_not_found, with a reason (responses.ts).
  { method: 'POST', path: '/v1/responses/compact', family: 'openai' },
  { method: 'POST', path: '/v1/completions', family: 'openai' },
  { method: 'POST', path: '/v1/messages', family: 'anthropic' },
  { method: 'POST', path: '/v1/messages/count_tokens', family: 'anthropic' },
  { method: 'GET', path: '/v1/models', family: 'openai' },
  { method: 'GET', path: '/v1/models/{model}', family: 'openai' },
  { method: 'POST', path: '/api/chat', family: 'ollama' },
  { method: 'POST', path: '/api/generate', family: 'ollama' },
  { method: 'POST', path: '/api/embed', family: 'ollama' },
  { method: 'POST', path: '/api/show', family: 'ollama' },
  { method: 'GET', path: '/api/tags', family: 'ollama' },
  { method: 'GET', path: '/api/ps', family: 'ollama' },
  { method: 'GET', path: '/api/version', family: 'ollama' },
  { method: 'GET', path: '/healthz', family: 'probe' },
  { method: 'GET', path: '/readyz', family: 'probe' },
  { method: 'GET', path: '/api/hello', family: 'probe' },
  { method: 'GET', path: '/', family: 'probe' },
];

/** `GET /v1/models`, ... as an answer names them, in this order, joined as a sentence. */
export function servedList(routes: readonly DataPlaneRoute[]): string {
  const names = routes.map((r) => `${r.method} ${r.path}`);
  return names.length <= 1 ? names.join('') : `${names.slice(0, -1).join(', ')} and ${names.at(-1) as string}`;
}
