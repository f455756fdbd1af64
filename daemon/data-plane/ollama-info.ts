import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { showModel, parseOllamaShowBody } from '../../src/apis/ollama/request.js';
import type { Instance } from '../../src/domain/instance.js';
import { ObProxyError, obError } from '../../src/errors.js';
import { clipped } from '../../src/printable.js';
import { type UpstreamAnswer, UpstreamAsk } from '../../src/upstream/upstream-ask.js';
import { upstreamStatusError } from '../../src/upstream/upstream-errors.js';
import { stringifyExact } from '../../src/wire/json-body.js';
import type { Json } from '../../src/wire/request-checks.js';
import type { ExchangeDeps } from '../context.js';
import type { AuthContext } from './auth-context.js';
import { type KeyStandingDeps, answerIfKeyLapsed } from './key-standing.js';
import { type BodyDeps, holdBody } from './body-reader.js';
import { replyError } from './send-error.js';

/*
 * Ollama's listings and cards behind the key (docs/contract.md §3b): `GET /api/tags` and
 * `GET /api/ps` (the model server's answer with the key's model alone), `POST /api/show` (for the
 * key's model only), `GET /api/version` (the model server's). Each asks the model server, so the
 * key's checks 2 to 5 run before it is asked and again before its answer is passed on: a key
 * revoked meanwhile gets its refusal, not the answer. No usage, limits or admission: these
 * generate nothing (as GET /v1/models).
 */

type Handler = (request: FastifyRequest, reply: FastifyReply) => Promise<FastifyReply>;

const GIN_JSON = 'application/json; charset=utf-8';

/** A model name as Ollama resolves it: without a tag, `:latest`. */
function tagged(model: string): string {
  return /:[^/]*$/.test(model) ? model : `${model}:latest`;
}

/** Whether a listed name is the instance's model (`tiny` is listed as `tiny:latest`). */
function isModel(listed: unknown, model: string): boolean {
  return typeof listed === 'string' && (listed === model || tagged(listed) === tagged(model));
}

function jsonObject(body: Buffer): Json | null {
  try {
    const v: unknown = JSON.parse(body.toString('utf8'));
    return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Json) : null;
  } catch {
    return null;
  }
}

function notAnAnswer(path: string): ObProxyError {
  return obError('upstream_error', {
    message: `The model server's answer to ${path} is not Ollama's; it was not relayed. Check the instance's endpoint.`,
  });
}

/** What is asked of the model server: `method path`, with `body` for a POST. */
/** What the listings and cards touch: the key's standing, the body budget, the model server's token. */
export type OllamaInfoDeps = KeyStandingDeps & BodyDeps & Pick<ExchangeDeps, 'upstreamTokens'>;

interface Question {
  method: 'GET' | 'POST';
  path: string;
  body: Buffer | string | null;
}

/**
 * Asks the model server `method path` for the key's instance and answers with `judge(answer)`:
 * the bytes to send, or an error. The model server's error status is passed on as every route
 * passes it on; a client that leaves aborts the ask.
 */
async function relayAsk(
  ctx: OllamaInfoDeps,
  ask: UpstreamAsk,
  reply: FastifyReply,
  question: Question,
  judge: (answer: Json, raw: Buffer, instance: Instance) => Buffer | string | ObProxyError,
): Promise<FastifyReply> {
  const request = reply.request;
  const { method, path, body } = question;
  if (answerIfKeyLapsed(ctx, request, reply)) return reply;
  const { key, instance } = request.auth as AuthContext;
  const token = ctx.upstreamTokens.get(instance.id);
  const gone = new AbortController();
  const left = (): void => {
    if (!reply.raw.writableFinished) gone.abort();
  };
  reply.raw.once('close', left);
  let answer: UpstreamAnswer;
  try {
    answer = await ask.ask(instance.endpoint as string, {
      method,
      path,
      body,
      token,
      signal: gone.signal,
      maxBytes: ctx.config.maxAnswerBytes,
      timeoutMs: ctx.config.upstreamTimeoutMs,
    });
  } catch (err) {
    if (!(err instanceof ObProxyError)) throw err;
    if (!gone.signal.aborted)
      ctx.log.warn({ reqId: request.id, instance: instance.id, key: key.id, code: err.code }, 'model server failed');
    return replyError(reply, err);
  } finally {
    reply.raw.off('close', left);
  }
  if (answerIfKeyLapsed(ctx, request, reply)) return reply;
  const { status } = answer;
  if (status >= 400 && status <= 599)
    return replyError(reply, upstreamStatusError(status, answer.contentType, answer.body.toString('utf8'), token));
  const parsed = status === 200 ? jsonObject(answer.body) : null;
  const out = parsed === null ? notAnAnswer(path) : judge(parsed, answer.body, request.auth?.instance ?? instance);
  if (out instanceof ObProxyError) {
    ctx.log.warn({ reqId: request.id, instance: instance.id, key: key.id, code: out.code }, 'model server failed');
    return replyError(reply, out);
  }
  return reply.code(200).type(GIN_JSON).send(out);
}

/** A listing (`/api/tags`, `/api/ps`) with the instance's model alone. */
function listing(ctx: OllamaInfoDeps, ask: UpstreamAsk, path: string): Handler {
  return (request, reply) =>
    relayAsk(ctx, ask, reply, { method: 'GET', path, body: null }, (answer, _raw, instance) => {
      const models = answer.models;
      if (models !== null && !Array.isArray(models)) return notAnAnswer(path);
      const mine = (models ?? []).filter(
        (m: unknown) =>
          typeof m === 'object' &&
          m !== null &&
          (isModel((m as Json).name, instance.model) || isModel((m as Json).model, instance.model)),
      );
      return JSON.stringify({ ...answer, models: mine });
    });
}

function version(ctx: OllamaInfoDeps, ask: UpstreamAsk): Handler {
  return (request, reply) =>
    relayAsk(ctx, ask, reply, { method: 'GET', path: '/api/version', body: null }, (answer, raw) =>
      typeof answer.version === 'string' ? raw : notAnAnswer('/api/version'),
    );
}

/**
 * `POST /api/show` for the key's model or one of its aliases (sent as the model); any other model
 * is not there for this key, as Ollama says of a model it lacks (404). The card goes on as it came.
 */
function show(ctx: OllamaInfoDeps, ask: UpstreamAsk): Handler {
  return async (request, reply) => {
    if (answerIfKeyLapsed(ctx, request, reply)) return reply;
    const { instance } = request.auth as AuthContext;
    let body: Buffer | string;
    try {
      const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
      const parsed = parseOllamaShowBody(raw);
      const { model, field } = showModel(parsed);
      if (model !== instance.model && !instance.aliases.includes(model))
        throw obError('model_not_found', {
          param: field,
          message: `model "${clipped(model)}" not found: this API key serves only "${instance.model}".`,
        });
      body = raw;
      if (model !== instance.model) body = stringifyExact(raw, { ...parsed, [field]: instance.model });
    } catch (err) {
      if (!(err instanceof ObProxyError)) throw err;
      return replyError(reply, err);
    }
    request.body = undefined;
    // The card goes on as its bytes came: it holds floats and integers JSON.parse could round.
    return relayAsk(ctx, ask, reply, { method: 'POST', path: '/api/show', body }, (_answer, raw) => raw);
  };
}

/**
 * The routes on `app`, behind `onRequest` (Ollama's error shape and the key's checks 1 to 4).
 * `/api/show`'s body is held in the daemon's byte budget as every body is.
 */
export function registerOllamaInfo(
  app: FastifyInstance,
  ctx: OllamaInfoDeps,
  onRequest: ((request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void)[],
): void {
  const ask = new UpstreamAsk();
  app.addHook('onClose', () => ask.close());
  app.get('/api/tags', { onRequest }, listing(ctx, ask, '/api/tags'));
  app.get('/api/ps', { onRequest }, listing(ctx, ask, '/api/ps'));
  app.get('/api/version', { onRequest }, version(ctx, ask));
  const held = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void => {
    if (holdBody(ctx, request, reply, (request.auth as AuthContext).key.id)) done();
  };
  app.post('/api/show', { onRequest: [...onRequest, held] }, show(ctx, ask));
}
