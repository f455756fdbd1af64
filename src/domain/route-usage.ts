/**
 * A key's usage split by the client API its requests came through (docs/contract.md §6): how
 * many requests, and the prompt and completion tokens charged for them, per route. Only routes
 * used appear. The key's totals (KeyUsage) stay the receipt; the split says where it went.
 */
export interface RouteUsage {
  requests: number;
  promptTokens: number;
  completionTokens: number;
}

/** By route name (`chat`, `responses`, `completions`, `messages`, `ollama_chat`, ...). */
export type UsageByRoute = Record<string, RouteUsage>;

/**
 * The routes in the order reports list them: the order of docs/compatibility.md. A name not
 * listed here (counted by a newer daemon sharing the store) comes after them, alphabetically.
 */
export const USAGE_ROUTES = [
  'chat',
  'responses',
  'completions',
  'messages',
  'count_tokens',
  'ollama_chat',
  'ollama_generate',
  'ollama_embed',
] as const;

/** A route name as a store may hold it: a short lower-case word (never `__proto__` and the like). */
export const ROUTE_NAME_RE = /^[a-z][a-z0-9_-]{0,31}$/;

function rank(route: string): number {
  const i = (USAGE_ROUTES as readonly string[]).indexOf(route);
  return i === -1 ? USAGE_ROUTES.length : i;
}

/** Route names in report order. */
export function routeOrder(byRoute: UsageByRoute): string[] {
  return Object.keys(byRoute).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * `b` added to `a`, as new objects in report order (neither is changed). `b` may be absent: an
 * increment from a daemon of a version that did not split usage by route adds nothing here.
 */
export function addByRoute(a: UsageByRoute, b: UsageByRoute | undefined): UsageByRoute {
  const sum: UsageByRoute = {};
  for (const side of [a, b ?? {}])
    for (const route of Object.keys(side)) {
      const r = side[route]!;
      const s = (sum[route] ??= { requests: 0, promptTokens: 0, completionTokens: 0 });
      s.requests += r.requests;
      s.promptTokens += r.promptTokens;
      s.completionTokens += r.completionTokens;
    }
  const out: UsageByRoute = {};
  for (const route of routeOrder(sum)) out[route] = sum[route]!;
  return out;
}

/**
 * The counters of `route` in `byRoute`, made on its first use. Changed in place by the request
 * path: `byRoute` is a key's running usage, or a delta not yet flushed.
 */
export function routeCounters(byRoute: UsageByRoute, route: string): RouteUsage {
  let r = byRoute[route];
  if (r === undefined) {
    r = { requests: 0, promptTokens: 0, completionTokens: 0 };
    byRoute[route] = r;
  }
  return r;
}
