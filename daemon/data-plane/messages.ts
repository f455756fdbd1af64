import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { messageId } from '../../src/ids.js';
import { tokenCount } from '../../src/wire/chat-response.js';
import { MessagesStreamRelay } from '../../src/apis/messages/event-relay.js';
import { type MessagesRequest, parseMessagesBody, validateMessagesRequest } from '../../src/apis/messages/request.js';
import { withTopId } from '../../src/wire/top-id.js';
import type { DaemonBasics } from '../context.js';
import { answerErrorsAsAnthropic } from './error-shape.js';
import { type ProxyDeps, makeProxyHandler } from './proxied-route.js';
import { type WireApi } from './wire-api.js';
import { RouteSupport } from './route-support.js';
import { PlainAnswer, type PlainShape } from './plain-relay.js';
import { StreamAnswer } from './stream-relay.js';

type Json = Record<string, unknown>;

/**
 * A plain Messages answer: the model server's `message` with our `msg_` id, as it sent it
 * otherwise. Usage from its `usage` (`input_tokens`, `output_tokens`).
 */
export const messageShape: PlainShape = (raw, text, parsed, answer) => {
  const body = parsed as Json | null;
  if (typeof body !== 'object' || body === null || Array.isArray(body) || body.type !== 'message') {
    answer.notAnAnswer('a Messages API message');
    return;
  }
  const out = withTopId(raw, text, body, answer.relay.c.id);
  if (out === null) {
    answer.tooDeep();
    return;
  }
  const u = typeof body.usage === 'object' && body.usage !== null ? (body.usage as Json) : null;
  answer.send(out, body, tokenCount(u?.input_tokens), tokenCount(u?.output_tokens), 0);
};

/**
 * POST /v1/messages, Anthropic's Messages API, passed through to the model server's own
 * (docs/contract.md §6). Anthropic's version headers go with it; the client's key (x-api-key or
 * Authorization) never does.
 */
export function messagesApi(ctx: Pick<DaemonBasics, 'clock'>): WireApi<MessagesRequest> {
  return {
    route: 'messages',
    logMessage: 'message',
    upstreamPath: '/v1/messages',
    parse: parseMessagesBody,
    validate: validateMessagesRequest,
    upstream: (raw) => raw,
    newId: messageId,
    answer(_ctx, rc, req) {
      if (!req.stream) return new PlainAnswer(messageShape);
      return new StreamAnswer(new MessagesStreamRelay(rc.id, rc.limits.maxFrameBytes, rc.upstreamToken));
    },
    support: new RouteSupport('POST /v1/messages', ctx.clock),
    fallback: null,
    forwardHeaders: ['anthropic-version', 'anthropic-beta'],
  };
}

export function makeMessagesHandler(ctx: ProxyDeps) {
  return makeProxyHandler(ctx, messagesApi(ctx));
}

/** A count_tokens answer, `{"input_tokens": N}`, passed on as sent: it costs no completion. */
const tokenCountShape: PlainShape = (raw, _text, parsed, answer) => {
  const body = parsed as Json | null;
  if (typeof body !== 'object' || body === null || Array.isArray(body) || typeof body.input_tokens !== 'number') {
    answer.notAnAnswer('a token count');
    return;
  }
  answer.send(raw, body, 0, 0, 0);
};

/**
 * POST /v1/messages/count_tokens (Claude Code may ask before a long turn): the same gate as a
 * message, passed to the model server's own where it serves it; a server without it is answered
 * Anthropic's 404, and not asked again for a while (route-support.ts).
 */
export function countTokensApi(ctx: Pick<DaemonBasics, 'clock'>): WireApi<MessagesRequest> {
  return {
    route: 'count_tokens',
    logMessage: 'token count',
    upstreamPath: '/v1/messages/count_tokens',
    parse: parseMessagesBody,
    validate: (body) => ({ ...validateMessagesRequest(body), stream: false, completionCap: 0 }),
    upstream: (raw) => raw,
    newId: messageId,
    answer: () => new PlainAnswer(tokenCountShape),
    support: new RouteSupport('POST /v1/messages/count_tokens', ctx.clock),
    fallback: null,
    forwardHeaders: ['anthropic-version', 'anthropic-beta'],
  };
}

export function makeCountTokensHandler(ctx: ProxyDeps) {
  return makeProxyHandler(ctx, countTokensApi(ctx));
}

/** The route's first hook, before the key's: every error on it, from here on, in Anthropic's shape. */
export function anthropicErrors(_request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  answerErrorsAsAnthropic(reply.raw);
  done();
}
