import { Agent } from 'undici';
import { obError } from '../errors.js';
import { limitErrors } from './answer-limits.js';
import { translateUpstreamError } from './upstream-errors.js';

/** A model server's whole answer to a small request: its status, its content type and its bytes. */
export interface UpstreamAnswer {
  status: number;
  contentType: string | undefined;
  body: Buffer;
}

export interface AskOptions {
  method: 'GET' | 'POST';
  /** The model server's path below the endpoint (`/api/tags`). */
  path: string;
  body: Buffer | string | null;
  /** The instance's token for its model server, if any; never a client's key. */
  token: string | undefined;
  /** Aborts the ask (the client left). */
  signal: AbortSignal;
  /** The answer is refused past this many bytes. */
  maxBytes: number;
  /** Connection, headers and body together. */
  timeoutMs: number;
}

/**
 * Asks a model server something small on a client's behalf and reads the whole answer (Ollama's
 * `/api/tags`, `/api/ps`, `/api/show`, `/api/version`): a listing or a model's card, not a
 * generation, so neither the request path's relays, usage nor admission are wanted. Bounded in
 * size and time like any answer; only our headers go, never the client's. Throws the refusal in
 * our codes (`upstream_unavailable`, `upstream_timeout`, `upstream_error`).
 */
export class UpstreamAsk {
  // Connections of its own: a listing never queues behind, or holds a socket of, the chat pools.
  private readonly agent = new Agent({ keepAliveTimeout: 4_000, connections: 8 });

  async ask(endpoint: string, o: AskOptions): Promise<UpstreamAnswer> {
    const url = new URL(`${endpoint.replace(/\/+$/, '')}${o.path}`);
    const timeout = AbortSignal.timeout(o.timeoutMs);
    const signal = AbortSignal.any([o.signal, timeout]);
    const headers: Record<string, string> = { accept: 'application/json', 'accept-encoding': 'identity' };
    if (o.body !== null) headers['content-type'] = 'application/json';
    if (o.token !== undefined) headers.authorization = `Bearer ${o.token}`;
    try {
      const res = await this.agent.request({
        origin: url.origin,
        path: url.pathname,
        method: o.method,
        headers,
        body: o.body,
        signal,
        headersTimeout: o.timeoutMs,
        bodyTimeout: o.timeoutMs,
      });
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        bytes += chunk.length;
        if (bytes > o.maxBytes) {
          res.body.destroy();
          throw limitErrors.answerTooLarge(o.maxBytes);
        }
        chunks.push(chunk);
      }
      const type = res.headers['content-type'];
      return {
        status: res.statusCode,
        contentType: Array.isArray(type) ? type[0] : type,
        body: Buffer.concat(chunks),
      };
    } catch (err) {
      if (timeout.aborted) throw obError('upstream_timeout');
      throw translateUpstreamError(err);
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}
