import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { NdjsonRelay } from '../../src/apis/ollama/ndjson-relay.js';
import {
  type OllamaRequest,
  parseOllamaChatBody,
  parseOllamaEmbedBody,
  parseOllamaGenerateBody,
  validateOllamaChat,
  validateOllamaEmbed,
  validateOllamaGenerate,
} from '../../src/apis/ollama/request.js';
import { tokenCount } from '../../src/wire/chat-response.js';
import type { Json } from '../../src/wire/request-checks.js';
import { obError } from '../../src/errors.js';
import { type AuthHookDeps, makeAuthHook } from './auth-hook.js';
import { answerErrorsAsOllama } from './error-shape.js';
import { type OllamaInfoDeps, registerOllamaInfo } from './ollama-info.js';
import { PlainAnswer, type PlainShape } from './plain-relay.js';
import { type ProxyDeps, makeProxyHandler } from './proxied-route.js';
import { type WireApi } from './wire-api.js';
import { replyError } from './send-error.js';
import { StreamAnswer } from './stream-relay.js';
import { DATA_PLANE_ROUTES, servedList } from './routes.js';

/**
 * A plain answer of Ollama's native API (`/api/chat`, `/api/generate`, `/api/embed`): a JSON
 * object, passed on as its bytes came (there is no id to replace). Usage from its
 * `prompt_eval_count` and `eval_count`.
 */
const ollamaShape: PlainShape = (raw, _text, parsed, answer) => {
  const body = parsed as Json | null;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    answer.notAnAnswer('an Ollama answer');
    return;
  }
  answer.send(raw, body, tokenCount(body.prompt_eval_count), tokenCount(body.eval_count), 0);
};

/** What tells one generating native route from the other. */
type GeneratingRoute = Pick<WireApi<OllamaRequest>, 'route' | 'logMessage' | 'upstreamPath' | 'parse' | 'validate'>;

/** The WireApi of a generating native route: `/api/chat` or `/api/generate`. */
function generating(r: GeneratingRoute): WireApi<OllamaRequest> {
  return {
    route: r.route,
    logMessage: r.logMessage,
    upstreamPath: r.upstreamPath,
    parse: r.parse,
    validate: r.validate,
    upstream: (raw) => raw,
    // Ollama's answers carry no id: nothing of ours goes in them.
    newId: () => '',
    answer(_ctx, rc, req) {
      if (!req.stream) return new PlainAnswer(ollamaShape);
      return new StreamAnswer(new NdjsonRelay(rc.limits.maxFrameBytes, rc.upstreamToken), 'ndjson');
    },
    support: null,
    fallback: null,
  };
}

export function ollamaChatApi(): WireApi<OllamaRequest> {
  return generating({
    route: 'ollama_chat',
    logMessage: 'ollama chat',
    upstreamPath: '/api/chat',
    parse: parseOllamaChatBody,
    validate: validateOllamaChat,
  });
}

export function ollamaGenerateApi(): WireApi<OllamaRequest> {
  return generating({
    route: 'ollama_generate',
    logMessage: 'ollama generate',
    upstreamPath: '/api/generate',
    parse: parseOllamaGenerateBody,
    validate: validateOllamaGenerate,
  });
}

/** `/api/embed`: passed through where the instance's model serves it; its usage is its input. */
export function ollamaEmbedApi(): WireApi<OllamaRequest> {
  return {
    route: 'ollama_embed',
    logMessage: 'ollama embed',
    upstreamPath: '/api/embed',
    parse: parseOllamaEmbedBody,
    validate: validateOllamaEmbed,
    upstream: (raw) => raw,
    newId: () => '',
    answer: () => new PlainAnswer(ollamaShape),
    support: null,
    fallback: null,
  };
}

const JSON_TYPE = /^application\/json\s*(;|$)/i;

/**
 * The request path of a native route. Ollama reads every body as JSON whatever its Content-Type
 * (its own docs' curl lines send `-d` alone, which says form data), so such a body is taken as
 * JSON here too; the body's bytes must still be UTF-8 JSON (json-body.ts).
 */
export function makeOllamaHandler(ctx: ProxyDeps, api: WireApi<OllamaRequest>) {
  const proxied = makeProxyHandler(ctx, api);
  return function ollamaRoute(request: FastifyRequest, reply: FastifyReply): void {
    if (!JSON_TYPE.test(request.headers['content-type'] ?? '')) request.headers['content-type'] = 'application/json';
    proxied(request, reply);
  };
}

/** The route's first hook, before the key's: every error on it, from here on, in Ollama's shape. */
export function ollamaErrors(_request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  answerErrorsAsOllama(reply.raw);
  done();
}

/** What manages the model server: the operator's, refused to every key (403 management_route). */
const MANAGEMENT = /^\/api\/(pull|push|create|copy|delete|blobs(\/[^/]*)?)\/?$/;

const SERVED = servedList(DATA_PLANE_ROUTES.filter((r) => r.family === 'ollama'));

/**
 * Ollama's own API on `app`, for its own clients (ollama-js, Open WebUI, LangChain's ChatOllama):
 * the generating routes on the one request path, the listings and cards (ollama-info.ts), and
 * every other path under /api answered in Ollama's error shape, those that manage the model
 * server with 403 before any key is looked at (no key may use them), the rest with 404.
 */
export function registerOllamaRoutes(app: FastifyInstance, ctx: ProxyDeps & AuthHookDeps & OllamaInfoDeps): void {
  const sent = [ollamaErrors, makeAuthHook(ctx, true)];
  app.post('/api/chat', { onRequest: sent }, makeOllamaHandler(ctx, ollamaChatApi()));
  app.post('/api/generate', { onRequest: sent }, makeOllamaHandler(ctx, ollamaGenerateApi()));
  app.post('/api/embed', { onRequest: sent }, makeOllamaHandler(ctx, ollamaEmbedApi()));
  registerOllamaInfo(app, ctx, [ollamaErrors, makeAuthHook(ctx, false)]);
  app.all('/api/*', { onRequest: ollamaErrors }, async (request, reply) => {
    const path = request.url.split('?')[0] as string;
    if (MANAGEMENT.test(path)) return replyError(reply, obError('management_route'));
    return replyError(
      reply,
      obError('route_not_found', {
        message: `No route ${request.method} ${path}. Ollama's API here serves ${SERVED}.`,
      }),
    );
  });
}
