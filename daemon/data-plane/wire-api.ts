import type { Json } from '../../src/wire/request-checks.js';
import type { DaemonBasics, ExchangeDeps } from '../context.js';
import type { Media } from '../../src/wire/media.js';
import type { RouteSupport } from './route-support.js';
import type { RelayAnswer, RelayContext } from './upstream-relay.js';

/** The client API an exchange came through (a WireApi): `chat`, `responses`, `completions`, `messages`. */
export interface ExchangeRoute {
  /** The name its usage is split by (KeyUsage.byRoute) and its metrics are labelled with. */
  readonly route: string;
  /** The access line's message. */
  readonly logMessage: string;
}

/** What the exchange needs to know of its request to charge it: numbers and flags, never the body. */
export interface ExchangeShape {
  stream: boolean;
  media: Media;
  /** The request's own cap on its completion (`max_tokens` and the like), or null. */
  completionCap: number | null;
}

/** A request checked and ready to send: what its exchange is charged by, and its model. */
export interface Checked extends ExchangeShape {
  model: string;
  /** temperature and top_p as given, or null: a trace span's attributes. */
  temperature: number | null;
  topP: number | null;
}

/** What a route's answer is made with: whether the fast path is on, and the layouts it learned. */
export type AnswerDeps = Pick<DaemonBasics, 'config'> & Pick<ExchangeDeps, 'eventLayouts'>;

/** Where a request is sent and what carries its answer: its API's own way, or the API's fallback. */
export interface Route<C extends Checked> {
  /** The model server's path for it (`/v1/chat/completions`). */
  readonly upstreamPath: string;
  /** How the answer is written (plain-relay.ts, stream-relay.ts), in this API's shape. */
  answer(ctx: AnswerDeps, rc: RelayContext, checked: C, deployment: string): RelayAnswer;
}

/** A request sent another way: the body that goes upstream, and the route it takes. */
export interface Resend<C extends Checked> {
  body: Buffer | string;
  route: Route<C>;
}

/**
 * One client API the data plane serves (chat completions, Responses, ...): how its body is read
 * and checked, what goes upstream, and which relay carries the answer. Everything else (the
 * key's checks before and at send time, admission, limits, the exchange's accounting, deadlines,
 * caps, revocations, disconnects) is the one request path below, the same for every API.
 */
export interface WireApi<C extends Checked> extends Route<C> {
  /** The route's name, in the access line and the metrics: `chat`, `responses`, ... */
  readonly route: string;
  /** The access line's message. */
  readonly logMessage: string;
  /** The body as every decoder reads it, or a throw (400 invalid_json): json-body.ts's rule. */
  parse(raw: Buffer): Json;
  /** The fields, as this API documents them, or a throw naming the field (400). */
  validate(body: Json): C;
  /** The bytes to send upstream. */
  upstream(raw: Buffer, checked: C): Buffer | string;
  /** Our id for the answer (the model server's may collide). */
  newId(): string;
  /** Which model servers serve the route, learned from their answers; null: every one does. */
  readonly support: RouteSupport | null;
  /** Client headers passed on to the model server (lower case; `anthropic-version`), if any. */
  readonly forwardHeaders?: readonly string[];
  /**
   * For a model server that lacks the route (`support`): the request sent another way (the
   * Responses API translated to chat completions), or null: refused with 404 route_not_found.
   * Throws a 400 naming the field for a request that cannot be sent so.
   */
  readonly fallback: ((checked: C) => Resend<C>) | null;
}
