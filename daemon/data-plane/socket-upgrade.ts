import { type IncomingMessage, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { WebSocketServer } from 'ws';
import type { ResponsesRequest } from '../../src/apis/responses/request.js';
import { obError } from '../../src/errors.js';
import { type AuthHookDeps, makeAuthHook } from './auth-hook.js';
import { type AuthContext } from './auth-context.js';
import { answerIfKeyLapsed } from './key-standing.js';
import type { WireApi } from './wire-api.js';
import { ResponsesSocket, type SocketDeps, type SocketRegistry, type SocketRoute } from './responses-socket.js';
import { replyError } from './send-error.js';

// The Responses API's WebSocket mode on GET /v1/responses: the upgrade request goes through
// Fastify like any request (the key's checks, in order, and its refusal as an HTTP answer), and
// only a request that passed them becomes a socket (responses-socket.ts).

/** What the upgrade listener keeps of a request it routed through Fastify, for the handler. */
interface Pending {
  socket: Duplex;
  head: Buffer;
}

const PATH = /^\/v1\/responses\/?(\?|$)/;

/** A WebSocket handshake for the Responses route: the only upgrade the data plane takes. */
export function isResponsesUpgrade(req: IncomingMessage): boolean {
  return req.method === 'GET' && req.headers.upgrade?.toLowerCase() === 'websocket' && PATH.test(req.url ?? '');
}

/**
 * Registers the WebSocket mode on `app`, whose HTTP server was made with
 * `shouldUpgradeCallback: isResponsesUpgrade` (buildDataPlane's `http` options): on a Node that
 * reads it, every other upgrade (curl's `Upgrade: h2c` on a POST) is served as a plain request,
 * as it always was. A Node before 22.21 (or 24.9) hands every upgrade to the listener; those not
 * for this route go back to Node's HTTP parser as a plain request, without the upgrade asked.
 */
export function serveResponsesSockets(
  app: FastifyInstance,
  ctx: SocketDeps & AuthHookDeps,
  api: WireApi<ResponsesRequest>,
): void {
  const registry = new Sockets(ctx.config.socketsPerKey);
  const route: SocketRoute = { ctx, api, registry };
  const wss = new WebSocketServer({
    noServer: true,
    // A message is a request body: the same bound (Node holds a message whole before it is read).
    maxPayload: ctx.config.bodyLimit,
    // Compression would let a small frame cost its inflated size, and every event a deflate.
    perMessageDeflate: false,
    clientTracking: false,
  });
  const pending = new WeakMap<IncomingMessage, Pending>();
  // The 101's own headers: what any answer to the key carries, and the largest message taken
  // (which Codex reads before it sends).
  const answerHeaders = new WeakMap<IncomingMessage, string[]>();
  wss.on('headers', (lines: string[], req: IncomingMessage) => {
    const extra = answerHeaders.get(req);
    if (extra !== undefined) lines.push(...extra);
  });

  app.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!isResponsesUpgrade(req)) {
      asPlainRequest(app, req, socket as Socket, head);
      return;
    }
    pending.set(req, { socket, head });
    const res = new ServerResponse(req);
    res.assignSocket(socket as Socket);
    // A refusal is the whole answer: the connection ends with it.
    res.shouldKeepAlive = false;
    res.once('finish', () => socket.end());
    app.routing(req, res);
  });

  // A plain GET (no upgrade) is answered as any unknown route, before the key is looked at.
  const upgradeOnly = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    if (pending.has(request.raw)) done();
    else reply.callNotFound();
  };
  // requireReady false: check 5 is made again with the others in the handler (answerIfKeyLapsed),
  // and the upgrade is no request of the key's limits (each message is).
  app.get('/v1/responses', { onRequest: [upgradeOnly, makeAuthHook(ctx, false)] }, (request, reply) => {
    const taken = pending.get(request.raw) as Pending;
    pending.delete(request.raw);
    if (answerIfKeyLapsed(ctx, request, reply)) return;
    const auth = request.auth as AuthContext;
    if (registry.max === 0) {
      replyError(
        reply,
        obError('route_not_found', {
          message:
            'The Responses WebSocket is off on this gateway (OB_PROXY_SOCKETS_PER_KEY=0): send POST /v1/responses.',
        }),
      );
      return;
    }
    const open = registry.count(auth.key.id);
    if (open >= registry.max) {
      replyError(
        reply,
        obError('rate_limited', {
          message: `This API key has ${open} Responses WebSockets open, as many as a key may keep (OB_PROXY_SOCKETS_PER_KEY). Close one, or send requests over HTTP.`,
        }),
        { 'retry-after': '1' },
      );
      return;
    }
    reply.hijack();
    answerHeaders.set(request.raw, [
      `x-request-id: ${request.id}`,
      `x-codex-websocket-max-message-bytes: ${ctx.config.bodyLimit}`,
      ...headerLines(request.rateLimit),
    ]);
    wss.handleUpgrade(request.raw, taken.socket, taken.head, (ws) => {
      registry.add(new ResponsesSocket(route, ws, request, auth));
    });
  });

  // Draining: idle sockets close now, busy ones once their response has ended (the grace
  // period's end aborts what is left upstream, which ends them too).
  app.addHook('preClose', (done) => {
    registry.drain();
    done();
  });
}

function headerLines(list: readonly (string | number)[] | null): string[] {
  const out: string[] = [];
  if (list !== null) for (let i = 0; i + 1 < list.length; i += 2) out.push(`${list[i]}: ${list[i + 1]}`);
  return out;
}

/** The sockets open, per key: what `--sockets-per-key` bounds, and what a drain closes. */
class Sockets implements SocketRegistry {
  private readonly byKey = new Map<string, Set<ResponsesSocket>>();
  private draining = false;

  constructor(readonly max: number) {}

  count(key: string): number {
    return this.byKey.get(key)?.size ?? 0;
  }

  add(socket: ResponsesSocket): void {
    let set = this.byKey.get(socket.key);
    if (set === undefined) this.byKey.set(socket.key, (set = new Set()));
    set.add(socket);
    if (this.draining) socket.drain();
  }

  remove(socket: ResponsesSocket): void {
    const set = this.byKey.get(socket.key);
    if (set === undefined) return;
    set.delete(socket);
    if (set.size === 0) this.byKey.delete(socket.key);
  }

  drain(): void {
    this.draining = true;
    for (const set of this.byKey.values()) for (const s of [...set]) s.drain();
  }
}

/**
 * An upgrade that is not ours, on a Node without shouldUpgradeCallback: its head written again
 * without the upgrade asked, and the connection handed back to Node's own HTTP parser, which
 * serves it (its body included) and what follows as plain requests. Node's listener is called,
 * not the 'connection' event: the connection caps counted this connection when it came.
 */
function asPlainRequest(app: FastifyInstance, req: IncomingMessage, socket: Socket, head: Buffer): void {
  const lines = [`${req.method} ${req.url} HTTP/${req.httpVersion}`];
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = (raw[i] as string).toLowerCase();
    let value = raw[i + 1] as string;
    if (name === 'upgrade' || name === 'http2-settings') continue;
    if (name === 'connection') {
      value = value
        .split(',')
        .map((t) => t.trim())
        .filter((t) => !/^(upgrade|http2-settings)$/i.test(t))
        .join(', ');
      if (value === '') continue;
    }
    lines.push(`${raw[i]}: ${value}`);
  }
  // An https server hears its connections once they are secure.
  const node = [...app.server.listeners('connection'), ...app.server.listeners('secureConnection')].find(
    (l) => l.name === 'connectionListener',
  );
  if (node === undefined) {
    socket.destroy();
    return;
  }
  socket.unshift(Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1'), head]));
  (node as (s: Socket) => void).call(app.server, socket);
}
