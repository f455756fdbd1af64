/**
 * One request to a model server or to the gateway, read whole: a JSON answer or a stream's
 * events. What the conformance tier compares (test/conformance/): answers apart from what each
 * side makes up (ids, timestamps, timings), and shapes (field sets, event order, usage placement).
 */

/** A route the gateway serves, and what of its answers is made up per request. */
export interface RouteSpec {
  readonly path: string;
  /** The answer (or one event) with what differs from request to request masked. */
  normalise(value: unknown): unknown;
  /** The id the gateway gives its answers on the route. */
  readonly ourId: RegExp;
  /** Whether the route's streams end with `data: [DONE]`. */
  readonly done: boolean;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Chat completions: `id` (ob-proxy's own, docs/contract.md §3), `created` (the second it was made), each
 * tool call's `id` (random on both servers), llama.cpp's `timings` (measurements) and
 * `usage.prompt_tokens_details.cached_tokens` (what the server's prompt cache held: the second
 * of two identical requests finds the first one's prompt there).
 */
function normaliseChat(value: unknown): unknown {
  if (!isObject(value)) return value;
  const out: Json = { ...value };
  if ('id' in out) out.id = '<id>';
  if ('created' in out) out.created = '<created>';
  delete out.timings;
  if (isObject(out.usage) && isObject(out.usage.prompt_tokens_details)) {
    out.usage = { ...out.usage, prompt_tokens_details: { ...out.usage.prompt_tokens_details, cached_tokens: '<n>' } };
  }
  if (Array.isArray(out.choices)) {
    out.choices = out.choices.map((c: unknown) => {
      if (!isObject(c)) return c;
      const part = isObject(c.message) ? 'message' : isObject(c.delta) ? 'delta' : null;
      if (part === null) return c;
      const m = c[part] as Json;
      if (!Array.isArray(m.tool_calls)) return c;
      const calls = m.tool_calls.map((t: unknown) => (isObject(t) && 'id' in t ? { ...t, id: '<call-id>' } : t));
      return { ...c, [part]: { ...m, tool_calls: calls } };
    });
  }
  return out;
}

/** Keys whose values each side makes up per request, at any depth: ids and timestamps. */
const MADE_UP = new Set(['id', 'item_id', 'call_id', 'created', 'created_at', 'completed_at']);

/**
 * The Responses API, legacy completions and Messages: every id (the response's, each item's, each
 * call's; the message's), every timestamp and llama.cpp's `timings` and cached-token count, masked
 * wherever they are in the answer or event.
 */
function normaliseDeep(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(normaliseDeep);
  if (!isObject(value)) return value;
  const out: Json = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === 'timings') continue;
    if (MADE_UP.has(k) && v !== null) out[k] = `<${k}>`;
    else if (k === 'cached_tokens') out[k] = '<n>';
    else out[k] = normaliseDeep(v);
  }
  return out;
}

/**
 * The routes of the differential test and the simulator's fidelity test: one row per route the
 * gateway serves. `ourId`: the shape of the id the gateway puts in place of the server's; `done`:
 * whether its streams end with `data: [DONE]`.
 */
export const ROUTES = {
  chat: { path: '/v1/chat/completions', normalise: normaliseChat, ourId: /^chatcmpl-[A-Za-z0-9]{24}$/, done: true },
  responses: { path: '/v1/responses', normalise: normaliseDeep, ourId: /^resp_[A-Za-z0-9]{24}$/, done: false },
  completions: { path: '/v1/completions', normalise: normaliseDeep, ourId: /^cmpl-[A-Za-z0-9]{24}$/, done: true },
  messages: { path: '/v1/messages', normalise: normaliseDeep, ourId: /^msg_[A-Za-z0-9]{24}$/, done: false },
} as const satisfies Record<string, RouteSpec>;

/** The gateway's id in an answer or stream of `route`: where each API keeps its id. */
export function answerIds(route: RouteSpec, x: Exchange): unknown[] {
  const values = x.events.length > 0 ? x.events.filter(isObject) : isObject(x.json) ? [x.json] : [];
  const ids: unknown[] = [];
  for (const v of values) {
    if (route.path === '/v1/responses') {
      if (isObject(v.response)) ids.push(v.response.id);
      else if (v.object === 'response') ids.push(v.id);
    } else if (route.path === '/v1/messages') {
      if (isObject(v.message)) ids.push(v.message.id);
      else if (v.type === 'message') ids.push(v.id);
    } else if ('id' in v) ids.push(v.id);
  }
  return ids;
}

/** An SSE event's data: parsed JSON, or the text when it is not JSON (`[DONE]`). */
export type StreamEvent = unknown;

export interface Exchange {
  status: number;
  contentType: string;
  /** The body parsed, for an answer that is not a stream (null when it is not JSON). */
  json: unknown;
  /** Each `data:` of a stream, in order (empty for an answer that is not a stream). */
  events: StreamEvent[];
  text: string;
}

/** The `data:` payloads of an SSE body, each parsed when it is JSON. */
export function parseEvents(text: string): StreamEvent[] {
  const out: StreamEvent[] = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    const data = block
      .split(/\r?\n/)
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).replace(/^ /, ''))
      .join('\n');
    if (data === '') continue;
    try {
      out.push(JSON.parse(data) as unknown);
    } catch {
      out.push(data);
    }
  }
  return out;
}

/** POSTs `body` (a string goes as it is) to `baseUrl + path` and reads the answer whole (a stream to its end). */
export async function exchange(
  baseUrl: string,
  path: string,
  body: unknown,
  key: string | null = null,
  signal?: AbortSignal,
): Promise<Exchange> {
  const res = await fetch(`${baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === null ? {} : { authorization: `Bearer ${key}` }) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...(signal === undefined ? {} : { signal }),
  });
  const text = await res.text();
  const contentType = res.headers.get('content-type') ?? '';
  const isStream = contentType.startsWith('text/event-stream');
  let json: unknown = null;
  if (!isStream) {
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
  }
  return { status: res.status, contentType, json, events: isStream ? parseEvents(text) : [], text };
}

/** The same answer, with what each request makes up masked. */
export function normalised(route: RouteSpec, x: Exchange): unknown {
  return {
    status: x.status,
    stream: x.contentType.startsWith('text/event-stream'),
    body: x.events.length > 0 ? x.events.map((e) => route.normalise(e)) : route.normalise(x.json),
  };
}

/** The ids of a stream's events (all the same through the gateway, and ours). */
export function eventIds(x: Exchange): unknown[] {
  return x.events.filter(isObject).map((e) => e.id);
}
