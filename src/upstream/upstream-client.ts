import { Pool, type Dispatcher } from 'undici';

export interface UpstreamOptions {
  connectTimeoutMs: number;
  /**
   * Connections per endpoint; default unlimited. Every connection serves one client request
   * (its own client socket bounds the count), and a cap would queue streams in the proxy,
   * out of the model server's sight and past the 2,000 concurrent streams we hold.
   */
  connections?: number | null;
}

export interface UpstreamRequest {
  endpoint: string;
  body: string | Buffer;
  stream: boolean;
  /** The model server's path below the endpoint; default `/v1/chat/completions`. */
  path?: string;
  requestId: string;
  /** Bearer token for the model server, when the instance has one; never the client's key. */
  token?: string | undefined;
  /** Client headers the route passes on (`anthropic-version`, ...); never a key, never Host. */
  forward?: Record<string, string> | null;
  /** The W3C trace context of the request's span, when tracing is on; never the client's own headers. */
  trace?: TraceHeaders | null;
}

/** W3C Trace Context (`traceparent`, `tracestate`), so the model server's trace joins the gateway's. */
export interface TraceHeaders {
  readonly traceparent: string;
  readonly tracestate: string | undefined;
}

const CHAT_PATH = '/v1/chat/completions';

/** Past this many origins, a new one first closes the pools with nothing open or waiting. */
export const IDLE_POOL_SWEEP_AT = 64;

/**
 * One keep-alive undici Pool per model-server origin. Requests carry only the headers we choose:
 * the client's Authorization and Host never reach the model server. The wait for an answer's
 * headers and between its reads is the handler's to bound (the relay's, in the daemon's
 * deadline sweep): undici's own time-outs made a timer object per request that its timer list
 * kept for half a second, so the old generation took one per request (deadlines.ts).
 */
export class UpstreamClient {
  private readonly pools = new Map<string, Pool>();
  /** Parsed endpoints: no URL parse on the request path. */
  private readonly targets = new Map<string, { origin: string; base: string; path: string }>();

  constructor(private readonly options: UpstreamOptions) {}

  private pool(origin: string): Pool {
    let pool = this.pools.get(origin);
    if (pool === undefined) {
      if (this.pools.size >= IDLE_POOL_SWEEP_AT) this.closeIdlePools();
      pool = new Pool(origin, {
        connections: this.options.connections ?? null,
        pipelining: 1,
        // Shorter than vLLM's 5 s keep-alive, so a socket the server is closing is not reused.
        keepAliveTimeout: 4_000,
        keepAliveMaxTimeout: 60_000,
        headersTimeout: 0,
        bodyTimeout: 0,
        connect: { timeout: this.options.connectTimeoutMs },
      });
      this.pools.set(origin, pool);
    }
    return pool;
  }

  /**
   * Sends the request and hands the answer to `handler` as it arrives. The handler API, not
   * `request()`: no AbortController, promise or body stream per request (the controller it
   * receives aborts, pauses and resumes), which the profile showed as undici's extra cost.
   */
  dispatch(req: UpstreamRequest, handler: Dispatcher.DispatchHandler): void {
    let target = this.targets.get(req.endpoint);
    if (target === undefined) {
      const url = new URL(req.endpoint);
      const base = url.pathname.replace(/\/$/, '');
      target = { origin: url.origin, base, path: `${base}${CHAT_PATH}` };
      if (this.targets.size > 1_000) this.targets.clear();
      this.targets.set(req.endpoint, target);
    }
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: req.stream ? 'text/event-stream' : 'application/json',
      'accept-encoding': 'identity',
      'x-request-id': req.requestId,
    };
    if (req.forward != null) for (const name in req.forward) headers[name] ??= req.forward[name] as string;
    if (req.token !== undefined) headers.authorization = `Bearer ${req.token}`;
    const path = req.path === undefined || req.path === CHAT_PATH ? target.path : `${target.base}${req.path}`;
    const trace = req.trace;
    if (trace != null) {
      headers.traceparent = trace.traceparent;
      if (trace.tracestate !== undefined) headers.tracestate = trace.tracestate;
    }
    this.pool(target.origin).dispatch({ method: 'POST', path, headers, body: req.body }, handler);
  }

  /**
   * Instances come and go (each rental its own address), and a pool was kept for every origin
   * ever asked: closed here once it holds no connection and no request. One that is asked again
   * is made anew.
   */
  private closeIdlePools(): void {
    for (const [origin, pool] of this.pools) {
      const s = pool.stats;
      if (s.connected === 0 && s.size === 0) {
        this.pools.delete(origin);
        void pool.close().catch(() => {});
      }
    }
  }

  /** Origins with a pool (for tests). */
  get poolCount(): number {
    return this.pools.size;
  }

  async close(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.close()));
    this.pools.clear();
  }

  /** Ends sockets at once (after the grace period). */
  async destroy(): Promise<void> {
    await Promise.all([...this.pools.values()].map((p) => p.destroy()));
    this.pools.clear();
  }
}
