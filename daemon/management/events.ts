import type { FastifyInstance } from 'fastify';
import type { AuditEvent } from '../../src/domain/key.js';
import type { DaemonContext } from '../context.js';

/**
 * GET /v1/events: Server-Sent Events of every change (the audit event; never a secret), so the
 * console updates without polling. A comment line every 15 s keeps idle connections honest.
 */
export function registerEventRoutes(app: FastifyInstance, ctx: DaemonContext): void {
  app.get('/v1/events', (request, reply) => {
    reply.hijack();
    const res = reply.raw;
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    res.write(': ob-proxy events\n\n');
    const send = (e: AuditEvent): void => {
      res.write(`data: ${JSON.stringify(e)}\n\n`);
    };
    const unsubscribe = ctx.lifecycle.onChange(send);
    const heartbeat = setInterval(() => res.write(': ping\n\n'), 15_000);
    heartbeat.unref();
    const stop = (): void => {
      clearInterval(heartbeat);
      unsubscribe();
    };
    request.raw.on('close', stop);
    res.on('close', stop);
  });
}
