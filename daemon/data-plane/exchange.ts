import type { ServerResponse } from 'node:http';
import type { HeaderList } from '../../src/services/key-limiter.js';
import type { ExchangeSpan } from '../tracing/exchange-span.js';
import type { AuthContext } from './auth-context.js';
import type { Checked, Route, WireApi } from './wire-api.js';

/**
 * One request on its way to a model server, made once when its body has passed every check and
 * handed on whole (proxied-route.ts `send`, `proxy`, `dispatch`, `resend`; accounting.ts), so
 * no step of the path takes its parts one by one. Made as one literal with every field, so every
 * exchange has one shape.
 */
export interface Exchange<C extends Checked> {
  /** The client API it came through. */
  readonly api: WireApi<C>;
  /** The way it is sent: its API's own, or the API's fallback (`resend` may change it). */
  route: Route<C>;
  readonly reqId: string;
  /** The key and its instance as they were when it was sent (the last re-check's). */
  auth: AuthContext;
  readonly checked: C;
  /** The bytes sent upstream `route`'s way. */
  body: Buffer | string;
  /** Where its answer is written: a hijacked Fastify response, or a WebSocket message's. */
  res: ServerResponse;
  /** What every answer to it carries (the key's x-ratelimit-*, its pack's end). */
  headers: HeaderList | null;
  /** The client's headers passed on to the model server, if its API names any. */
  forward: Record<string, string> | null;
  /** The instance whose admission slot it holds, or null. */
  slot: string | null;
  /** Its trace span; null: tracing off. */
  trace: ExchangeSpan | null;
}
