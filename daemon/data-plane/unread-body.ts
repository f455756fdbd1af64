import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * How long a connection closed under an unread body keeps reading (and dropping) what its client
 * still sends, after our answer and our FIN. Long enough for the answer to reach the client and
 * for it to stop sending; short enough that a drain never waits on it for long.
 */
export const LINGER_MS = 2_000;

/** A request that announced a body (Content-Length above 0, or Transfer-Encoding) not all here yet. */
export function bodyPending(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * Called before a response's head is written. An answer sent before its request's body has all
 * arrived (every refusal decided on the headers alone: a bad key, a key over its limits, a
 * deployment not ready, …) closes the connection. Left open, Node's server would keep it alive
 * and read the rest of the body to throw it away, however large the client said it was; until
 * the last byte came, Node counted the connection as busy, so `closeIdleConnections` passed it
 * over and a SIGTERM drain waited for it until the request time-out or the grace period ended.
 * Reading an unknown client's body only to keep its connection is not worth it either.
 *
 * The close lingers (RFC 9112 §9.6): our side sends its FIN after the answer, then reads and
 * drops what the client still sends for at most LINGER_MS, and only then closes. Closing a
 * socket with unread bytes makes the kernel send a reset, which can make the client lose the
 * answer it has not read yet (an SDK would report a connection error and retry, not the 401).
 */
export function closeIfBodyPending(res: ServerResponse): void {
  const req = res.req;
  if (!bodyPending(req)) return;
  // Also when the answer was to close anyway (a 413, a drain's 503, a 417): it lingers the same.
  res.shouldKeepAlive = false;
  // Node closes a response that is not kept alive with socket.destroySoon() once it has been
  // written: end() and, when the FIN is flushed, destroy(). That destroy is what lingers instead.
  const socket = req.socket as Socket & { destroySoon?: () => void };
  if (typeof socket.destroySoon !== 'function' || Object.hasOwn(socket, 'destroySoon')) return;
  socket.destroySoon = lingeringClose;
}

function lingeringClose(this: Socket): void {
  if (this.destroyed) return;
  const timer = setTimeout(() => this.destroy(), LINGER_MS);
  timer.unref();
  this.once('close', () => clearTimeout(timer));
  // The client's FIN: it has nothing more to send, and has read our answer or never will.
  this.once('end', () => this.destroy());
  if (this.writable) this.end();
}
