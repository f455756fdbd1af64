import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ObProxyError, obError } from '../../src/errors.js';
import { completionId } from '../../src/ids.js';
import { type ChatRequest, upstreamBody, validateChatRequest } from '../../src/wire/chat-request.js';
import type { DaemonContext } from '../context.js';
import type { AuthContext } from './auth-hook.js';
import { replyError } from './send-error.js';
import { PlainRelay, type RelayContext, StreamRelay } from './upstream-relay.js';

const INFO_LEVELS = new Set(['trace', 'debug', 'info']);
const JSON_TYPE = /^application\/json\s*(;|$)/i;

function parseBody(request: FastifyRequest): Record<string, unknown> {
  const raw = request.body;
  if (!Buffer.isBuffer(raw) || raw.length === 0) {
    throw obError('invalid_json', { message: 'The request body is empty. Send a JSON chat completion request.' });
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw obError('invalid_json', { message: `The request body is not valid JSON (${(err as Error).message}).` });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw obError('invalid_json', { message: 'The request body must be a JSON object.' });
  }
  return parsed as Record<string, unknown>;
}

export function makeChatHandler(ctx: DaemonContext) {
  // Not async: the reply is hijacked, so Fastify need not wait on a promise for each request.
  return function chatCompletions(request: FastifyRequest, reply: FastifyReply): void {
    const auth = request.auth as AuthContext;
    let chat: ChatRequest;
    try {
      const body = parseBody(request);
      if (!JSON_TYPE.test(request.headers['content-type'] ?? '')) {
        throw obError('invalid_request', { message: 'Content-Type must be application/json.' });
      }
      chat = validateChatRequest(body);
      if (chat.model !== auth.instance.model) {
        throw obError('model_mismatch', {
          param: 'model',
          message: `This API key is bound to a deployment of "${auth.instance.model}"; the request asked for "${chat.model}". Set model to "${auth.instance.model}".`,
        });
      }
    } catch (err) {
      if (!(err instanceof ObProxyError)) throw err;
      replyError(reply, err);
      return;
    }
    reply.hijack();
    const started = performance.now();
    const done = proxy(ctx, request, reply.raw, auth, chat);
    // The access line; its object is not even built when info is off (--log-level warn).
    if (INFO_LEVELS.has(ctx.log.level)) {
      void done.then(() => {
        ctx.log.info({ reqId: request.id, key: auth.key.id, instance: auth.instance.id, stream: chat.stream, status: reply.raw.statusCode, ms: Math.round((performance.now() - started) * 100) / 100 }, 'chat completion');
      });
    }
  };
}

function proxy(ctx: DaemonContext, request: FastifyRequest, res: ServerResponse, auth: AuthContext, chat: ChatRequest): Promise<void> {
  ctx.usage.record(auth.key, ctx.clock.now(), 0, 0);
  const inflight = ctx.inflight;
  const rc: RelayContext = {
    res,
    id: completionId(),
    model: chat.model,
    reqId: request.id,
    nowSec: () => Math.floor(ctx.clock.now() / 1000),
    // Called once, when the exchange is over: it leaves the in-flight set then.
    countTokens: (prompt, completion) => {
      inflight.delete(auth.key, relay);
      ctx.usage.addTokens(auth.key, prompt, completion);
    },
  };
  const relay = chat.stream ? new StreamRelay(rc, chat.includeUsage, ctx.frameShapes.for(auth.instance.id)) : new PlainRelay(rc);
  // In the turn the key was re-checked (makeRecheckHook): from here a revocation ends it.
  inflight.add(auth.key, relay);
  ctx.upstream.dispatch({
    endpoint: auth.instance.endpoint as string,
    body: upstreamBody(request.body as Buffer, chat),
    stream: chat.stream,
    requestId: request.id,
    token: ctx.upstreamTokens.get(auth.instance.id),
  }, relay);
  return relay.done;
}
