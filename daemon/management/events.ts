import type { FastifyInstance } from 'fastify';
import type { AuditEvent } from '../../src/domain/key.js';
import type { DaemonBasics, KeyCheckDeps } from '../context.js';

/**
 * What a reader of the event stream may leave unread in the daemon's memory. A stop writes one
 * event per key at once (10,000 keys with 64-character names: about 3 MiB), which a reading
 * console takes in a moment. A reader that stops reading (a console suspended with Ctrl-Z, a
 * script that never reads) is disconnected instead of buffered for without end: it reads the whole
 * state again when it reconnects, as the console does.
 */
export const MAX_UNREAD_EVENT_BYTES = 16 * 1024 * 1024;

/**
 * GET /v1/events: Server-Sent Events of every change (the audit event; never a secret), so the
 * console updates without polling. A comment line every 15 s keeps idle connections honest.
 */
export function registerEventRoutes(
  app: FastifyInstance,
  ctx: Pick<KeyCheckDeps, 'lifecycle'> & Pick<DaemonBasics, 'log'>,
): void {
  app.get('/v1/events', (request, reply) => {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(': ob-proxy events\n\n');
    const write = (text: string): void => {
      if (res.destroyed) return;
      res.write(text);
      if (res.writableLength <= MAX_UNREAD_EVENT_BYTES) return;
      ctx.log.warn(
        { unreadBytes: res.writableLength },
        'event stream reader is not reading: disconnected (it reads the state again when it reconnects)',
      );
      res.destroy();
    };
    const unsubscribe = ctx.lifecycle.onChange((e: AuditEvent) => write(`data: ${JSON.stringify(e)}\n\n`));
    const heartbeat = setInterval(() => write(': ping\n\n'), 15_000);
    heartbeat.unref();
    const stop = (): void => {
      clearInterval(heartbeat);
      unsubscribe();
    };
    request.raw.on('close', stop);
    res.on('close', stop);
  });
}
