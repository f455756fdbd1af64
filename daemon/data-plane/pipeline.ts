import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * Requests pipelined on one connection that may wait for the one being answered. Real clients
 * do not pipeline (browsers and SDKs open connections instead); a connection that sends more is
 * closed.
 */
export const MAX_PIPELINED = 32;

type Handler = (this: Server, req: IncomingMessage, res: ServerResponse) => void;

/** Requests of a connection waiting for the answer before theirs to be written. */
const WAITING = Symbol('pipelined requests waiting');
type PipelinedSocket = Socket & { [WAITING]?: number };

/**
 * Serves the requests of one connection one after the other. Node parses every request a client
 * pipelines and hands each to the handler at once, holding the answers back to send them in
 * order: a client that wrote hundreds of chat completions in one packet and never read started
 * them all upstream together, and every answer (up to --max-answer-bytes each) waited in memory,
 * unbounded, for the client to read the first. Now a pipelined request waits, unstarted, until
 * Node gives its response the connection (when the answer before it has been written), and past
 * MAX_PIPELINED waiting the connection is closed: a connection costs at most one request upstream
 * and one answer in memory.
 *
 * Node assigns the connection to a response at once unless an earlier response on it is still
 * being written, so a request that was not pipelined costs one comparison here: no listener, no
 * closure. Wraps the server's 'request' listeners (Fastify's), so it applies to every request,
 * including the ones re-emitted for `Expect: 100-continue`.
 */
export function servePipelinedInOrder(server: Server): void {
  const handlers = server.listeners('request') as Handler[];
  server.removeAllListeners('request');
  const handle = function (this: Server, req: IncomingMessage, res: ServerResponse): void {
    for (const h of handlers) h.call(this, req, res);
  };
  server.on('request', function (this: Server, req: IncomingMessage, res: ServerResponse): void {
    if (res.socket !== null) {
      handle.call(this, req, res);
      return;
    }
    const socket = req.socket as PipelinedSocket;
    const waiting = (socket[WAITING] ?? 0) + 1;
    if (waiting > MAX_PIPELINED) {
      socket.destroy();
      return;
    }
    socket[WAITING] = waiting;
    res.once('socket', () => {
      socket[WAITING] = (socket[WAITING] ?? 1) - 1;
      handle.call(this, req, res);
    });
  });
}
