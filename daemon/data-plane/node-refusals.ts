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
 * turned off in buildDataPlane so that this one answers instead). `Expect: 100-continue` is left
 * to Node, which answers 100 Continue and reads the body.
 */
export function answerNodeRefusals(app: FastifyInstance): void {
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
