import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { obError } from '../../src/errors.js';
import { requestId } from '../../src/ids.js';
import { replyError, writeRawError, writeSocketError } from './send-error.js';

/**
 * Requests Node's HTTP server answers by itself, before Fastify sees them, outside the OpenAI
 * envelope SDKs parse: an `Expect` other than 100-continue (a bare 417), CONNECT (the socket
 * closed without a word) and an HTTP/1.1 request without Host (a bare 400; Node's own check is
 * turned off in buildDataPlane so that this one answers instead). `Expect: 100-continue` is
 * answered here too, not by Node: see `sendContinue`.
 */
export function answerNodeRefusals(app: FastifyInstance): void {
  // With a listener here Node neither writes the 100 nor emits 'request': the request goes to
  // Fastify as any other, and the 100 is written by the auth hook once the key has passed.
  app.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    app.server.emit('request', req, res);
  });

  app.server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    // Closed after the answer: a client may send the body it was holding back anyway, and those
    // bytes are not a request.
    res.shouldKeepAlive = false;
    writeRawError(res, obError('expectation_failed'), requestId());
  });

  app.server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    writeSocketError(
      socket,
      obError('route_not_found', {
        message:
          'No route for CONNECT: the proxy is not a forward proxy. It serves POST /v1/chat/completions and GET /v1/models.',
      }),
    );
  });

  app.addHook('onRequest', (request, reply, done) => {
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined) {
      reply.header('connection', 'close');
      replyError(
        reply,
        obError('malformed_http', {
          message: 'An HTTP/1.1 request needs a Host header. Use an HTTP client or an OpenAI SDK.',
        }),
      );
      return;
    }
    done();
  });
}

/**
 * `Expect: 100-continue` is the client asking whether to upload its body at all. Node answered
 * 100 as soon as the headers came, before the key was checked, so a client with a bad, revoked or
 * rate-limited key uploaded its whole body (up to --body-limit) only to be refused. The auth hook
 * calls this when a request has passed every check made on its headers; a refusal is answered
 * without a 100, and its connection closed (unread-body.ts).
 */
export function sendContinue(res: ServerResponse): void {
  const expect = res.req.headers.expect;
  if (expect !== undefined && /^100-continue$/i.test(expect.trim()) && !res.headersSent) res.writeContinue();
}
