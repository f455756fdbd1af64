import type { FastifyReply, FastifyRequest } from 'fastify';
import { obError } from '../../src/errors.js';
import { responseId } from '../../src/ids.js';
import { encodeJson } from '../../src/wire/chat-response.js';
import {
  type ResponsesRequest,
  parseResponsesBody,
  validateResponsesRequest,
} from '../../src/apis/responses/request.js';
import { usageCounts } from '../../src/apis/responses/layouts.js';
import { ResponsesStreamRelay } from '../../src/apis/responses/event-relay.js';
import { ResponsesLayoutsByServer } from '../../src/apis/responses/server-layouts.js';
import { spliceResponseId } from '../../src/apis/responses/splice.js';
import type { DaemonBasics } from '../context.js';
import { type ProxyDeps, makeProxyHandler } from './proxied-route.js';
import { type WireApi } from './wire-api.js';
import { translateResponses } from './responses-translation.js';
import { RouteSupport } from './route-support.js';
import { PlainAnswer, type PlainShape } from './plain-relay.js';
import { StreamAnswer } from './stream-relay.js';
import { replyError } from './send-error.js';

type Json = Record<string, unknown>;

/**
 * A plain Responses answer: the model server's response object with our id, its own bytes with
 * the id spliced in where that is the same value (apis/responses/splice.ts), else re-encoded, the
 * trailing newline kept. Usage from its `usage` (`input_tokens`, `output_tokens`, reasoning in
 * `output_tokens_details`).
 */
function responseShape(splice: boolean): PlainShape {
  return (raw, text, parsed, answer) => {
    if (
      typeof parsed !== 'object' ||
      parsed === null ||
      Array.isArray(parsed) ||
      (parsed as Json).object !== 'response'
    ) {
      answer.notAnAnswer('a Responses API response');
      return;
    }
    const body = parsed as Json;
    const id = answer.relay.c.id;
    let out: Buffer | string | null = splice ? spliceResponseId(raw, text, body, id) : null;
    if (out === null) {
      body.id = id;
      const encoded = encodeJson(body);
      if (encoded === null) {
        answer.tooDeep();
        return;
      }
      out = text.endsWith('\n') ? `${encoded}\n` : encoded;
    }
    const usage = usageCounts(body.usage);
    answer.send(out, body, usage.prompt, usage.completion, usage.reasoning);
  };
}

/** `spliced`: the fast path is on (OB_PROXY_RELAY_FAST_PATH); `reencoded`: off, every answer is re-encoded. */
export const RESPONSE_SHAPES = { spliced: responseShape(true), reencoded: responseShape(false) };

/**
 * POST /v1/responses (docs/contract.md §6), passed through to the model server's own; where the
 * model server has none, translated to and from its chat completions (responses-translation.ts).
 */
export function responsesApi(ctx: Pick<DaemonBasics, 'config' | 'clock'>): WireApi<ResponsesRequest> {
  // Learned per model server, shared by its streams (apis/responses/layouts.ts).
  const layouts = ctx.config.relayFastPath ? new ResponsesLayoutsByServer() : null;
  return {
    route: 'responses',
    logMessage: 'response',
    upstreamPath: '/v1/responses',
    parse: parseResponsesBody,
    validate: validateResponsesRequest,
    upstream: (raw) => raw,
    newId: responseId,
    answer(_ctx, rc, req, deployment) {
      if (!req.stream)
        return new PlainAnswer(ctx.config.relayFastPath ? RESPONSE_SHAPES.spliced : RESPONSE_SHAPES.reencoded);
      return new StreamAnswer(
        new ResponsesStreamRelay(
          rc.id,
          rc.limits.maxFrameBytes,
          rc.upstreamToken,
          ctx.config.relayFastPath,
          layouts?.for(deployment) ?? null,
        ),
      );
    },
    support: new RouteSupport('POST /v1/responses', ctx.clock),
    // A model server without /v1/responses: translated to its /v1/chat/completions.
    fallback: translateResponses,
  };
}

/** `api`: shared with the route's WebSocket mode (socket-upgrade.ts), which learns the same model servers. */
export function makeResponsesHandler(ctx: ProxyDeps, api = responsesApi(ctx)) {
  return makeProxyHandler(ctx, api);
}

const NO_COMPACTION = obError('route_not_found', {
  message:
    'POST /v1/responses/compact is not served: no model server here compacts, and its answer is an opaque item that only the server that wrote it can read back. Shorten the conversation on the client (Codex compacts by itself), or send it whole.',
});

/**
 * POST /v1/responses/compact, refused whatever its key: a summary the gateway asked the model
 * for would be a turn of the key's like any other, not the compaction item the API promises,
 * and no model server would take that item back as input.
 */
export function refuseCompaction(_request: FastifyRequest, reply: FastifyReply): void {
  replyError(reply, NO_COMPACTION);
}
