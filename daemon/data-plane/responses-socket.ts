import type { FastifyRequest } from 'fastify';
import type { RawData, WebSocket } from 'ws';
import { type ResponsesRequest, validateResponsesRequest } from '../../src/apis/responses/request.js';
import { type Turn, readCreateEvent, warmupAnswer } from '../../src/apis/responses/socket-create.js';
import { ObProxyError, obError } from '../../src/errors.js';
import { responseId } from '../../src/ids.js';
import { stringifyExact } from '../../src/wire/json-body.js';
import { estimatePromptTokens } from '../../src/wire/prompt-estimate.js';
import type { ExchangeDeps, KeyCheckDeps } from '../context.js';
import { endDuePacksSoon } from './key-standing.js';
import { type AuthContext } from './auth-context.js';
import { watchClose } from './close-watch.js';
import type { InflightEntry, InflightNode } from './inflight.js';
import { overLimit } from './key-limits.js';
import { type ProxyDeps, modelMismatch, proxy } from './proxied-route.js';
import { type Route, type WireApi } from './wire-api.js';
import { writeRawError } from './send-error.js';
import { SocketMessage, SocketSlot } from './socket-message.js';
import type { MessageSink } from './socket-response.js';
import { SocketWaiter, refuseQueued } from './socket-waiter.js';

/** The sockets of the data plane, per key (socket-upgrade.ts). */
export interface SocketRegistry {
  remove(socket: ResponsesSocket): void;
}

/** The Responses route's place in the metrics' routes (metrics.ts ROUTES). */
const RESPONSES_ROUTE = 1;
/** Our own messages a client may leave unread (refusals while a response is under way): then it is closed. */
const UNREAD_MAX = 1024 * 1024;
/** How long a closing handshake may take before the connection is dropped. */
const CLOSE_WAIT_MS = 1000;

/** 1008 policy violation: the key can no longer be served, or the client breaks the socket's bounds. */
const POLICY = 1008;
const GOING_AWAY = 1001;

/** What a socket touches: the request path's, its body memory, and whether the daemon is draining. */
export type SocketDeps = ProxyDeps & Pick<KeyCheckDeps, 'draining'> & Pick<ExchangeDeps, 'bodies'>;

/** What every socket of one listener shares: made once when the route is served. */
export interface SocketRoute {
  readonly ctx: SocketDeps;
  readonly api: WireApi<ResponsesRequest>;
  readonly registry: SocketRegistry;
}

/**
 * One WebSocket of the Responses API's WebSocket mode, bound to the key of its upgrade request.
 * Each `response.create` is checked as an HTTP request is (the key again, its limits, the body,
 * the model) and sent upstream as one streamed POST through the same request path
 * (proxied-route.ts `proxy`: relays, deadlines, usage, metrics, traces, access line), its events
 * sent back as text messages (socket-response.ts). One response at a time: a message that comes
 * while one is under way is refused (`response_in_progress`), unread.
 *
 * The socket keeps its last response (its input and output) for `previous_response_id`, in the
 * key's share of body memory; nothing else keeps it, so only this socket, hence this key, can
 * continue it. The socket is in its key's in-flight list for its whole life: a revocation or a
 * pack end closes it (1008) with the error event, after ending its response, within a second.
 */
export class ResponsesSocket implements InflightNode, MessageSink {
  readonly key: string;
  /** The instance whose share of body memory the socket's bytes count in: its id, which never changes. */
  private readonly instanceId: string;
  inflightEntry: InflightEntry | null = null;
  inflightPrev: InflightNode | null = null;
  inflightNext: InflightNode | null = null;
  private under: SocketMessage | null = null;
  private turn: Turn | null = null;
  private idle: NodeJS.Timeout | null = null;
  /** Set once it is to close: at once when idle, else when the response under way has ended. */
  private closing: { code: number; reason: string; err?: ObProxyError } | null = null;
  private closed = false;
  /** Messages taken (not those refused while a response was under way), for the closing log line. */
  private messages = 0;

  private readonly ctx: SocketDeps;
  private readonly api: WireApi<ResponsesRequest>;
  private readonly registry: SocketRegistry;

  constructor(
    route: SocketRoute,
    private readonly ws: WebSocket,
    private readonly upgrade: FastifyRequest,
    private auth: AuthContext,
  ) {
    const ctx = route.ctx;
    this.ctx = ctx;
    this.api = route.api;
    this.registry = route.registry;
    this.key = auth.key.id;
    this.instanceId = auth.instance.id;
    ctx.inflight.add(auth.key, this);
    ws.on('message', (data, isBinary) => this.guarded(() => this.onMessage(data, isBinary)));
    ws.on('close', (code, reason) => this.gone(code, String(reason)));
    // A protocol error (a message past --body-limit: 1009) closes it; 'close' follows.
    ws.on('error', () => {});
    this.startIdle();
    ctx.log.info({ reqId: upgrade.id, key: this.key, instance: auth.instance.id }, 'websocket opened');
  }

  send(text: string, sent: () => void): void {
    this.ws.send(text, sent);
  }

  get buffered(): number {
    return this.ws.bufferedAmount;
  }

  /** Its key was revoked, its pack ended, or the store is out of sync (inflight.ts). */
  terminate(err: ObProxyError): void {
    if (this.closing !== null) return;
    const m = this.under;
    // A message under way is in the same in-flight list, and its answer ends with the error
    // event itself; the socket closes after it (`over`), or in a second at most.
    if (m !== null && !m.res.writableEnded) {
      this.closing = { code: POLICY, reason: err.wireCode, err };
      const force = setTimeout(() => this.close(POLICY, err.wireCode), CLOSE_WAIT_MS);
      force.unref();
      return;
    }
    if (m?.errorCode !== err.wireCode) this.own(err);
    this.close(POLICY, err.wireCode);
  }

  /** The daemon is draining: closes now, or once the response under way has ended. */
  drain(): void {
    if (this.under === null) this.close(GOING_AWAY, 'shutting_down');
    else this.closing ??= { code: GOING_AWAY, reason: 'shutting_down' };
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    if (this.closing !== null) return;
    if (this.under !== null) {
      this.own(obError('response_in_progress'));
      return;
    }
    this.stopIdle();
    this.messages++;
    const m = new SocketMessage(this);
    this.under = m;
    m.res.once('close', () => this.guarded(() => this.over(m)));
    if (isBinary) {
      m.refuse(obError('invalid_request', { message: 'Send response.create events as JSON text messages.' }));
      return;
    }
    const refusal = this.ctx.draining ? obError('shutting_down') : this.recheck();
    if (refusal !== null) {
      this.closing = this.ctx.draining
        ? { code: GOING_AWAY, reason: 'shutting_down' }
        : { code: POLICY, reason: refusal.wireCode };
      m.refuse(refusal);
      return;
    }
    // Buffers: the server's binaryType is ws's default, nodebuffer.
    const raw = Array.isArray(data) ? Buffer.concat(data) : (data as Buffer);
    if (!this.admit(m) || !this.hold(m, raw.length)) return;
    this.check(m, raw);
  }

  /** Checks 2 to 5 again, for this message (the instance as it is now, its endpoint maybe moved). */
  private recheck(): ObProxyError | null {
    const { ctx } = this;
    if (ctx.storeStale) return obError('store_unreachable');
    const r = ctx.lifecycle.registry.check(this.auth.key, ctx.clock.now(), true);
    if (r.ok) {
      if (r.instance !== this.auth.instance) this.auth = { key: this.auth.key, instance: r.instance };
      return null;
    }
    if (r.packEnded === true) endDuePacksSoon(ctx);
    ctx.metrics?.keyRefused(r.code);
    return obError(r.code);
  }

  /** The key's requests per minute and at once (key-limits.ts admitKey, for a message). */
  private admit(m: SocketMessage): boolean {
    const { ctx } = this;
    const key = this.auth.key;
    const l = key.limits;
    if (l.rpm === null && l.tpm === null && l.concurrency === null) return true;
    const v = ctx.keyLimits.admit(key, ctx.clock.now());
    if (v.refused !== null) {
      ctx.metrics?.rateLimited(this.auth.instance.id, v.refused);
      m.refuse(overLimit(v.refused, l[v.refused] as number, v.retryAfterMs));
      return false;
    }
    if (v.entered) watchClose(m.res.asResponse, new SocketSlot(ctx, key.id));
    return true;
  }

  /** `n` more bytes of the message in the key's share of body memory (body-reader.ts), till its answer is over. */
  private hold(m: SocketMessage, n: number): boolean {
    const why = this.ctx.bodies.take(this.key, this.instanceId, n);
    if (why === null) {
      m.held += n;
      return true;
    }
    this.ctx.metrics?.rateLimited(this.auth.instance.id, why === 'daemon' ? 'body_memory_full' : 'body_memory');
    m.refuse(
      why === 'daemon'
        ? obError('proxy_overloaded')
        : obError('rate_limited', {
            message: `This API key${why === 'instance' ? "'s instance" : ''} holds its share of the proxy's memory for request bodies and WebSocket state (${why === 'instance' ? '--body-memory-per-instance' : '--body-memory-per-key'}). Retry when some of its requests are over, or continue with less context.`,
          }),
    );
    return false;
  }

  /** The event read, continued, checked and made into the upstream request, then limited and sent. */
  private check(m: SocketMessage, raw: Buffer): void {
    const { ctx, api } = this;
    const instance = this.auth.instance;
    let checked: ResponsesRequest;
    let upstream: Buffer;
    let route: Route<ResponsesRequest> = api;
    let warmup: boolean;
    try {
      const event = readCreateEvent(raw, this.turn);
      const body = event.body;
      if (body.model !== instance.model && instance.aliases.includes(body.model as string)) body.model = instance.model;
      m.previous = event.previous;
      m.input = body.input;
      checked = validateResponsesRequest(body);
      if (checked.model !== instance.model) throw modelMismatch(instance, checked.model);
      warmup = event.warmup;
      // A warm-up is answered here, but held in memory as what it would send.
      if (!warmup && api.support !== null && api.support.missing(instance)) {
        if (api.fallback === null) throw api.support.notServed(instance);
        const other = api.fallback(checked);
        route = other.route;
        upstream = Buffer.from(other.body);
      } else upstream = Buffer.from(stringifyExact(raw, body));
    } catch (err) {
      if (!(err instanceof ObProxyError)) throw err;
      m.refuse(err);
      return;
    }
    if (upstream.length > m.held && !this.hold(m, upstream.length - m.held)) return;
    if (warmup) {
      m.res.writeHead(200);
      m.res.end(warmupAnswer(responseId(), instance.model, checked.body, ctx.clock.now()));
      return;
    }
    const tpm = this.auth.key.limits.tpm;
    if (tpm !== null) {
      const r = ctx.keyLimits.reserve(
        this.auth.key,
        estimatePromptTokens(upstream.length, checked.media),
        checked.completionCap,
        ctx.clock.now(),
      );
      if (r.refused) {
        ctx.metrics?.rateLimited(instance.id, 'tpm');
        m.refuse(overLimit('tpm', tpm, r.retryAfterMs));
        return;
      }
      m.reserved = r.tokens;
    }
    const admission = ctx.admission;
    if (admission === null) this.dispatch(m, route, checked, upstream, null);
    else if (admission.take(instance.id)) this.dispatch(m, route, checked, upstream, instance.id);
    else {
      const w = new SocketWaiter(ctx, this.key, instance.id, m);
      m.go = () => {
        const again = this.recheck();
        if (again === null) this.dispatch(m, route, checked, upstream, instance.id);
        else {
          admission.leave(instance.id);
          this.closing = { code: POLICY, reason: again.wireCode };
          m.refuse(again);
        }
      };
      if (admission.wait(instance.id, w) === 'full') refuseQueued(ctx, 'queue_full', instance.id, m);
      else {
        m.waiter = w;
        ctx.inflight.add(this.auth.key, w);
      }
    }
  }

  private dispatch(
    m: SocketMessage,
    route: Route<ResponsesRequest>,
    checked: ResponsesRequest,
    upstream: Buffer,
    slot: string | null,
  ): void {
    const { ctx, auth } = this;
    m.sent = true;
    m.waiter = null;
    ctx.metrics?.addedTime((performance.now() - m.startedAt) / 1000);
    try {
      const trace = ctx.tracing === null ? null : ctx.tracing.socketExchange(this.upgrade, m.startedAt, auth, checked);
      proxy(ctx, {
        api: this.api,
        route,
        reqId: m.reqId,
        auth,
        checked,
        body: upstream,
        res: m.res.asResponse,
        headers: null,
        forward: null,
        slot,
        trace,
      });
    } catch (err) {
      if (slot !== null) ctx.admission?.leave(slot);
      ctx.log.error({ err, reqId: m.reqId }, 'unhandled error sending a WebSocket message upstream');
      writeRawError(m.res.asResponse, obError('internal_error'), m.reqId);
    }
  }

  /** The message's answer is over (written whole, or its client gone). */
  private over(m: SocketMessage): void {
    const { ctx } = this;
    this.under = null;
    ctx.bodies.give(this.key, this.instanceId, m.held);
    ctx.keyLimits.release(this.key, m.reserved);
    m.waiter?.leave();
    const status = m.res.statusCode;
    ctx.metrics?.answered(
      this.auth.instance.id,
      this.key,
      status,
      (performance.now() - m.startedAt) / 1000,
      RESPONSES_ROUTE,
    );
    if (m.refusedCode !== null && !m.sent && m.refusedCode !== 'rate_limited')
      ctx.log.info(
        { reqId: m.reqId, route: 'WS /v1/responses', status, code: m.refusedCode, key: this.key },
        'refused',
      );
    // Closed meanwhile: it keeps nothing (gone() let go of its turn).
    if (this.closed) return;
    if (m.turn !== null && !m.res.destroyed) this.keep(m.turn);
    // A continuation that failed lets go of what it continued (OpenAI's rule): a retry sends it all.
    else if (m.failed && m.previous !== null) this.keep(null);
    const closing = this.closing;
    if (closing === null) {
      this.startIdle();
      return;
    }
    // Its answer was over before the revocation reached it: the error event is the socket's own.
    if (closing.err !== undefined && m.errorCode !== closing.err.wireCode) this.own(closing.err);
    this.close(closing.code, closing.reason);
  }

  /** `turn` becomes the socket's last response, in the key's share of body memory, or none is kept. */
  private keep(turn: Turn | null): void {
    const bodies = this.ctx.bodies;
    if (this.turn !== null) bodies.give(this.key, this.instanceId, this.turn.bytes);
    this.turn = turn !== null && bodies.take(this.key, this.instanceId, turn.bytes) === null ? turn : null;
  }

  /** Our own error event, outside any exchange; a client that leaves them unread is closed. */
  private own(err: ObProxyError): void {
    if (this.ws.bufferedAmount > UNREAD_MAX) {
      this.close(POLICY, 'the client does not read its messages');
      return;
    }
    this.ws.send(JSON.stringify({ type: 'error', status: err.status, error: err.toBody().error }));
  }

  private close(code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.closing ??= { code, reason };
    this.stopIdle();
    this.ws.close(code, reason);
    const t = setTimeout(() => this.ws.terminate(), CLOSE_WAIT_MS);
    t.unref();
  }

  /** The connection is closed, by either side: nothing of it stays, upstream or in memory. */
  private gone(code: number, reason: string): void {
    // Closed by us: why, rather than what a client that never answered left (1006).
    const why = this.closing ?? { code, reason };
    this.ctx.log.info(
      { reqId: this.upgrade.id, key: this.key, code: why.code, reason: why.reason, messages: this.messages },
      'websocket closed',
    );
    this.closed = true;
    this.stopIdle();
    this.ctx.inflight.delete(this);
    this.registry.remove(this);
    this.keep(null);
    const m = this.under;
    if (m !== null) {
      m.waiter?.leave();
      m.res.destroy();
    }
  }

  private startIdle(): void {
    this.stopIdle();
    this.idle = setTimeout(() => this.close(1000, 'idle'), this.ctx.config.socketIdleTimeoutMs);
    this.idle.unref();
  }

  private stopIdle(): void {
    if (this.idle !== null) clearTimeout(this.idle);
    this.idle = null;
  }

  /** On the socket's own events, where a throw would end the process: logged, and the socket closed. */
  private guarded(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.ctx.log.error({ err, key: this.key }, 'unhandled error on a Responses WebSocket');
      this.close(1011, 'internal_error');
    }
  }
}
