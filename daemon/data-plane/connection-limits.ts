import { readFileSync } from 'node:fs';
import type { IncomingMessage, Server as HttpServer, ServerResponse } from 'node:http';
import type { Server, Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { clientOf } from './bad-key-limiter.js';

// What one connection may cost before and between its requests: connections capped in all and
// per address, and the requests pipelined on one served one after the other.

/** Descriptors kept for the daemon itself: store files, the management socket, metrics, logs. */
export const RESERVED_DESCRIPTORS = 128;
/** Without a descriptor limit to read (not Linux): the cap assumed. */
const FALLBACK_MAX_CONNECTIONS = 4_096;
/** One line per address (and one for the global cap) at most this often. */
const LOG_EVERY_MS = 60_000;
/** Addresses remembered for the once-a-minute log line; past it the memory starts again. */
const MAX_LOGGED = 10_000;

/** The process's soft RLIMIT_NOFILE (`ulimit -n`, a unit's LimitNOFILE), or null where unknown. */
export function descriptorLimit(limits = '/proc/self/limits'): number | null {
  let text: string;
  try {
    text = readFileSync(limits, 'utf8');
  } catch {
    return null;
  }
  const soft = /^Max open files\s+(\d+|unlimited)/m.exec(text)?.[1];
  return soft === undefined || soft === 'unlimited' ? null : Number(soft);
}

export interface ConnectionCaps {
  /** Connections open at once on the public port. */
  max: number;
  /** From one address (an IPv6 /64); 0: no per-address cap. */
  perAddress: number;
}

/**
 * The caps in force. Each client connection may need a second descriptor for its request's
 * socket to the model server, so the default cap is half of what the descriptor limit leaves
 * after RESERVED_DESCRIPTORS: a flood of connections can then never take the descriptors the
 * daemon needs to serve the clients it has. One address gets at most half the cap by default,
 * so that one client alone cannot fill it.
 */
export function connectionCaps(
  given: { maxConnections: number | null; maxConnectionsPerAddress: number | null },
  nofile: number | null,
): ConnectionCaps {
  const derived =
    nofile === null ? FALLBACK_MAX_CONNECTIONS : Math.max(1, Math.floor((nofile - RESERVED_DESCRIPTORS) / 2));
  const max = given.maxConnections ?? derived;
  const perAddress = given.maxConnectionsPerAddress ?? Math.max(1, Math.floor(max / 2));
  return { max, perAddress };
}

/**
 * Caps the connections of the public listener, counted per connection (never per request) on
 * `connection`. A connection past a cap is closed as it arrives, before a byte of it is read:
 * without a cap, one address could open idle connections (each held up to the 60 s header limit
 * or the 65 s keep-alive) until the process ran out of descriptors, and then no client could
 * connect and no request could open its socket to a model server.
 *
 * The global cap is Node's own `maxConnections` (its `drop` event tells us). Refusals are logged
 * once a minute per address, and once a minute for the global cap, never once per connection:
 * a flood must not fill the operator's disk either.
 */
export function limitConnections(server: Server, caps: ConnectionCaps, log: FastifyBaseLogger): void {
  server.maxConnections = caps.max;
  const open = new Map<string, number>();
  const logged = new Map<string, number>();

  const warnOnce = (client: string, fields: Record<string, unknown>, message: string): void => {
    const now = Date.now();
    const last = logged.get(client);
    if (last !== undefined && now - last < LOG_EVERY_MS) return;
    if (logged.size >= MAX_LOGGED) logged.clear();
    logged.set(client, now);
    log.warn(fields, message);
  };

  server.on('drop', (data?: { remoteAddress?: string }) => {
    const client = data?.remoteAddress === undefined ? 'unknown' : clientOf(data.remoteAddress);
    warnOnce(
      '*',
      { limit: 'global', max: caps.max, client },
      'connections refused: the public port holds its maximum of connections (OB_PROXY_MAX_CONNECTIONS); new ones are closed as they arrive',
    );
  });

  if (caps.perAddress === 0) return;
  server.on('connection', (socket) => {
    // A socket already closed by its client has no address: nothing to count.
    if (socket.remoteAddress === undefined) return;
    const client = clientOf(socket.remoteAddress);
    const count = open.get(client) ?? 0;
    if (count >= caps.perAddress) {
      socket.destroy();
      warnOnce(
        client,
        { limit: 'per-address', max: caps.perAddress, client },
        'connections refused: this address holds its maximum of connections (OB_PROXY_MAX_CONNECTIONS_PER_ADDRESS); its new ones are closed as they arrive',
      );
      return;
    }
    open.set(client, count + 1);
    socket.once('close', () => {
      const left = (open.get(client) ?? 1) - 1;
      if (left === 0) open.delete(client);
      else open.set(client, left);
    });
  });
}

/**
 * Requests pipelined on one connection that may wait for the one being answered. Real clients
 * do not pipeline (browsers and SDKs open connections instead); a connection that sends more is
 * closed.
 */
export const MAX_PIPELINED = 32;

type Handler = (this: HttpServer, req: IncomingMessage, res: ServerResponse) => void;

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
export function servePipelinedInOrder(server: HttpServer): void {
  const handlers = server.listeners('request') as Handler[];
  server.removeAllListeners('request');
  const handle = function (this: HttpServer, req: IncomingMessage, res: ServerResponse): void {
    for (const h of handlers) h.call(this, req, res);
  };
  server.on('request', function (this: HttpServer, req: IncomingMessage, res: ServerResponse): void {
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
