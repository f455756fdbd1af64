import type { ServerResponse } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Dispatcher } from 'undici';
import { ObProxyError, obError } from '../../src/errors.js';
import { completionId } from '../../src/ids.js';
import { type ChatRequest, validateChatRequest } from '../../src/wire/chat-request.js';
import { normalizeCompletion, usageOf } from '../../src/wire/chat-response.js';
import { spliceCompletionId } from '../../src/wire/completion-splice.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { translateUpstreamError, upstreamStatusError } from '../../src/upstream/upstream-errors.js';
import type { DaemonContext } from '../context.js';
import type { AuthContext } from './auth-hook.js';
import { replyError, writeRawError } from './send-error.js';

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
  return async function chatCompletions(request: FastifyRequest, reply: FastifyReply): Promise<void> {
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
    await proxy(ctx, request, reply.raw, auth, chat);
    // The access line; its object is not even built when info is off (--log-level warn).
    if (INFO_LEVELS.has(ctx.log.level)) {
      ctx.log.info({ reqId: request.id, key: auth.key.id, instance: auth.instance.id, stream: chat.stream, status: reply.raw.statusCode, ms: Math.round((performance.now() - started) * 100) / 100 }, 'chat completion');
    }
  };
}

async function proxy(ctx: DaemonContext, request: FastifyRequest, res: ServerResponse, auth: AuthContext, chat: ChatRequest): Promise<void> {
  const abort = new AbortController();
  const onClose = (): void => {
    if (!res.writableFinished) abort.abort();
  };
  res.on('close', onClose);
  ctx.usage.record(auth.key, ctx.clock.now(), 0, 0);
  const id = completionId();
  let upstream: Dispatcher.ResponseData;
  try {
    upstream = await ctx.upstream.request({
      endpoint: auth.instance.endpoint as string,
      body: chat.rewritten === null ? (request.body as Buffer) : JSON.stringify(chat.rewritten),
      stream: chat.stream,
      requestId: request.id,
      signal: abort.signal,
      token: ctx.upstreamTokens.get(auth.instance.id),
    });
  } catch (err) {
    if (!abort.signal.aborted) writeRawError(res, translateUpstreamError(err), request.id);
    return;
  }
  try {
    if (upstream.statusCode !== 200) {
      const text = await upstream.body.text();
      writeRawError(res, upstreamStatusError(upstream.statusCode, header(upstream, 'content-type'), text), request.id);
    } else if (chat.stream) {
      await relayStream(ctx, res, upstream, auth, chat, id, request.id);
    } else {
      await relayPlain(ctx, res, upstream, auth, chat, id, request.id);
    }
  } catch (err) {
    upstream.body.destroy();
    if (abort.signal.aborted) return;
    const e = translateUpstreamError(err);
    if (!res.headersSent) writeRawError(res, e, request.id);
    else endStreamWithError(res, e);
  } finally {
    res.off('close', onClose);
  }
}

function header(up: Dispatcher.ResponseData, name: string): string | undefined {
  const v = up.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

async function relayPlain(ctx: DaemonContext, res: ServerResponse, up: Dispatcher.ResponseData, auth: AuthContext, chat: ChatRequest, id: string, reqId: string): Promise<void> {
  const text = await up.body.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = null;
  }
  // Parsed once, for the shape check and usage; the bytes are re-serialised only when the shape needs fixing.
  let out = spliceCompletionId(text, parsed, id);
  const body = out !== null ? (parsed as Record<string, unknown>) : normalizeCompletion(parsed, id, chat.model, Math.floor(ctx.clock.now() / 1000));
  if (body === null) {
    writeRawError(res, obError('upstream_error', { message: 'The model server sent an answer that is not a chat completion. Check the instance\'s endpoint.' }), reqId);
    return;
  }
  const usage = usageOf(body);
  ctx.usage.addTokens(auth.key, usage.prompt, usage.completion);
  out ??= JSON.stringify(body);
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out), 'x-request-id': reqId });
  res.end(out);
}

async function relayStream(ctx: DaemonContext, res: ServerResponse, up: Dispatcher.ResponseData, auth: AuthContext, chat: ChatRequest, id: string, reqId: string): Promise<void> {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'x-accel-buffering': 'no',
    'x-request-id': reqId,
  });
  // The headers leave with the first chunk when it is already here (one write, not two); when
  // the model is slow to its first token, they leave on the next turn of the event loop.
  setImmediate(() => {
    if (!res.headersSent && !res.destroyed) res.flushHeaders();
  });
  const relay = new SseRelay(id, chat.includeUsage);
  try {
    await pump(up.body, res, relay);
  } finally {
    const usage = relay.usage;
    ctx.usage.addTokens(auth.key, usage?.prompt_tokens ?? 0, usage?.completion_tokens ?? relay.contentChunks);
  }
  if (relay.done) {
    if (!res.writableEnded) res.end();
    return;
  }
  if (relay.invalid) {
    up.body.destroy();
    endStreamWithError(res, obError('upstream_error', { message: 'The model server sent an event that is not valid JSON; the stream was ended.' }));
    return;
  }
  endStreamWithError(res, obError('upstream_unavailable', { message: 'The model server ended the stream before it was complete.' }));
}

/**
 * Relays the upstream body through the SSE relay. On each 'readable' it takes everything
 * buffered at once (read() joins it): a model server's tokens that came in one socket read go
 * out in one write, as they arrived, instead of one write per token (per-token writes were
 * the largest cost left in the streaming profile). Back-pressure: stop reading until 'drain'.
 * The client's response ends at [DONE]; the bytes after it (the chunked terminator) are still
 * read, so the upstream connection goes back to the pool instead of being destroyed and
 * reconnected for the next request. Resolves at the upstream's end or at an invalid event;
 * rejects on an upstream error (and on the abort that follows a client disconnect).
 */
function pump(body: Dispatcher.ResponseData['body'], res: ServerResponse, relay: SseRelay): Promise<void> {
  return new Promise((resolve, reject) => {
    let settled = false;
    let waiting = false;
    const finish = (err?: unknown): void => {
      if (settled) return;
      settled = true;
      body.off('readable', onReadable);
      body.off('end', onEnd);
      body.off('error', finish);
      body.off('close', onClose);
      if (err === undefined) resolve();
      else reject(err instanceof Error ? err : new Error(String(err)));
    };
    const onReadable = (): void => {
      if (waiting || settled) return;
      let chunk: Buffer | null;
      while ((chunk = body.read() as Buffer | null) !== null) {
        if (relay.done) continue;
        const out = relay.pushBytes(chunk);
        if (relay.invalid) {
          finish();
          return;
        }
        if (relay.done) {
          res.end(out ?? undefined);
          continue;
        }
        if (out !== null && !res.write(out)) {
          waiting = true;
          void drainedOrClosed(res).then(() => {
            waiting = false;
            onReadable();
          });
          return;
        }
      }
    };
    const onEnd = (): void => finish();
    // A body destroyed without an error event (never expected from undici): do not hang.
    const onClose = (): void => finish(relay.done ? undefined : new Error('the upstream body closed before its end'));
    body.on('readable', onReadable);
    body.on('end', onEnd);
    body.on('error', finish);
    body.on('close', onClose);
  });
}

/**
 * Waits until the client can take more. A client that goes away while we wait never drains:
 * 'close' ends the wait too (the upstream is aborted by then, so the relay loop ends next).
 */
function drainedOrClosed(res: ServerResponse): Promise<void> {
  if (res.destroyed) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

/** After a 200 has been sent, the only way to say "failed": one error event, no [DONE]. */
function endStreamWithError(res: ServerResponse, err: ObProxyError): void {
  if (res.writableEnded) return;
  const e = err.code === 'upstream_timeout'
    ? obError('upstream_timeout', { message: 'The model server sent nothing for too long; the stream was ended.' })
    : err;
  res.end(`data: ${JSON.stringify(e.toBody())}\n\n`);
}
