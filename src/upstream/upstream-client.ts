import { Pool, type Dispatcher } from 'undici';

export interface UpstreamOptions {
  /** No response headers within this time: 504. */
  timeoutMs: number;
  connectTimeoutMs: number;
  /** Longest silence between body chunks; defaults to timeoutMs. */
  idleTimeoutMs?: number;
  /** Connections per endpoint. */
  connections?: number;
}

export interface UpstreamRequest {
  endpoint: string;
  body: string | Buffer;
  stream: boolean;
  requestId: string;
  signal: AbortSignal;
  /** Bearer token for the model server, when the instance has one; never the client's key. */
  token?: string | undefined;
}

/**
 * One keep-alive undici Pool per model-server origin. Requests carry only the headers we choose:
 * the client's Authorization and Host never reach the model server.
 */
export class UpstreamClient {
  private readonly pools = new Map<string, Pool>();

  constructor(private readonly options: UpstreamOptions) {}

  private pool(origin: string): Pool {
    let pool = this.pools.get(origin);
    if (pool === undefined) {
      pool = new Pool(origin, {
        connections: this.options.connections ?? 256,
        pipelining: 1,
        // Shorter than vLLM's 5 s keep-alive, so a socket the server is closing is not reused.
        keepAliveTimeout: 4_000,
        keepAliveMaxTimeout: 60_000,
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.idleTimeoutMs ?? this.options.timeoutMs,
        connect: { timeout: this.options.connectTimeoutMs },
      });
      this.pools.set(origin, pool);
    }
    return pool;
  }

  request(req: UpstreamRequest): Promise<Dispatcher.ResponseData> {
    const url = new URL(req.endpoint);
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: req.stream ? 'text/event-stream' : 'application/json',
      'accept-encoding': 'identity',
      'x-request-id': req.requestId,
    };
    if (req.token !== undefined) headers.authorization = `Bearer ${req.token}`;
    return this.pool(url.origin).request({
      method: 'POST',
      path: `${url.pathname.replace(/\/$/, '')}/v1/chat/completions`,
      headers,
      body: req.body,
      signal: req.signal,
    });
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
