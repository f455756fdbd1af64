/**
 * `POST /v1/chat/completions`: Ollama's validation, then a reply (streaming or not) shaped by the
 * request's knobs, including the failure modes. Each in-flight response is a Job; its timer is
 * cleared and generation stops as soon as the response closes (client gone, or close()).
 */
import type { ServerResponse } from 'node:http';
import {
  type AgentReply,
  agentCompletion,
  agentFrames,
  completionTokens,
  planReply,
  refuseInput,
} from './sim-agent.js';
import { resolveKnobs } from './sim-directives.js';
import { HOSTILE_MODES, hostile } from './sim-hostile.js';
import {
  completionBody,
  completionId,
  contentOf,
  countPromptTokens,
  DONE_FRAME,
  errorBody,
  ginErrorBody,
  GARBAGE,
  HTML_500,
  nowSeconds,
  runnerErrorMessage,
  StreamFrames,
  tokenText,
} from './sim-responses.js';
import type { Knobs } from './sim-types.js';
import type { ChatEnv, Job, ParsedBody, SimChatRequest } from './sim-job.js';

const JSON_CT = 'application/json';
const GIN_JSON_CT = 'application/json; charset=utf-8';
const SSE_HEADERS = { 'Content-Type': 'text/event-stream' };

export function sendJson(res: ServerResponse, status: number, body: string, contentType = JSON_CT): void {
  res.writeHead(status, { 'Content-Type': contentType });
  res.end(body);
}

/** Runs `fn` after `ms` unless the job is done by then; synchronously when ms <= 0. */
function later(job: Job, ms: number, fn: () => void): void {
  if (ms <= 0) {
    fn();
    return;
  }
  job.timer = setTimeout(() => {
    job.timer = null;
    if (!job.done) fn();
  }, ms);
}

/** Destroys the socket once what was written has reached the kernel (so the client sees it). */
function cutWhenFlushed(job: Job): void {
  job.cut = true;
  const { socket } = job;
  const tick = (): void => {
    job.timer = null;
    if (socket.destroyed) return;
    if (socket.writableLength === 0) socket.destroy();
    else job.timer = setTimeout(tick, 1);
  };
  job.timer = setTimeout(tick, 0);
}

function goType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'boolean') return 'bool';
  return typeof v;
}

function typeError(v: unknown, field: string, goTypeName: string): string {
  return `json: cannot unmarshal ${goType(v)} into Go struct field ChatCompletionRequest.${field} of type ${goTypeName}`;
}

/** Ollama's checks, in its order: JSON, types, messages (middleware), then model (handler). */
function validate(parsed: ParsedBody, env: ChatEnv): SimChatRequest | { status: number; message: string; ct: string } {
  if (!parsed.ok) return { status: 400, message: parsed.message, ct: GIN_JSON_CT };
  const body = parsed.value ?? {};
  if (typeof body !== 'object' || Array.isArray(body)) {
    return {
      status: 400,
      message: `json: cannot unmarshal ${goType(body)} into Go value of type openai.ChatCompletionRequest`,
      ct: GIN_JSON_CT,
    };
  }
  const b = body as Record<string, unknown>;
  const { model = null, messages = null, stream = null, max_tokens: maxTokens = null } = b;
  const streamOptions = (b.stream_options ?? null) as { include_usage?: unknown } | null;
  if (model !== null && typeof model !== 'string')
    return { status: 400, message: typeError(model, 'model', 'string'), ct: GIN_JSON_CT };
  if (messages !== null && !Array.isArray(messages)) {
    return { status: 400, message: typeError(messages, 'messages', '[]openai.Message'), ct: GIN_JSON_CT };
  }
  if (stream !== null && typeof stream !== 'boolean')
    return { status: 400, message: typeError(stream, 'stream', 'bool'), ct: GIN_JSON_CT };
  if (maxTokens !== null && !Number.isInteger(maxTokens)) {
    return { status: 400, message: typeError(maxTokens, 'max_tokens', 'int'), ct: GIN_JSON_CT };
  }
  if (messages === null || messages.length === 0)
    return { status: 400, message: "[] is too short - 'messages'", ct: GIN_JSON_CT };
  if (model === null || model === '') return { status: 400, message: 'model is required', ct: JSON_CT };
  const refused = refuseInput(messages);
  if (refused !== null) return { status: 400, message: refused, ct: GIN_JSON_CT };
  if (!env.hasModel(model)) return { status: 404, message: `model '${model}' not found`, ct: JSON_CT };
  if (!env.agent().reasoning && typeof b.reasoning_effort === 'string' && b.reasoning_effort !== 'none') {
    return { status: 400, message: `"${model}" does not support thinking`, ct: JSON_CT };
  }
  return {
    model,
    body: b,
    messages,
    stream: stream === true,
    includeUsage: stream === true && typeof streamOptions === 'object' && streamOptions?.include_usage === true,
    maxTokens: capOf(env.agent().flavor === 'vllm' ? (b.max_completion_tokens ?? maxTokens) : maxTokens),
  };
}

/** Ollama reads max_tokens alone; vLLM gives max_completion_tokens precedence over it. */
function capOf(v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null;
}

/** Answers one chat completion request whose body has been read and recorded. */
export function handleChat(job: Job, parsed: ParsedBody, env: ChatEnv): void {
  const v = validate(parsed, env);
  if ('status' in v) {
    // The middleware's refusals go through gin (charset, no newline); the handler's through json.Encoder.
    const body = v.ct === GIN_JSON_CT ? ginErrorBody(v.status, v.message) : errorBody(v.status, v.message);
    sendJson(job.res, v.status, body, v.ct);
    return;
  }
  const k = resolveKnobs(env.knobs(), v.messages);
  if (k.fail === 'hang' || (k.fail === 'hang-mid-stream' && !v.stream)) return; // never answer
  if (HOSTILE_MODES.has(k.fail)) {
    later(job, k.firstTokenDelayMs, () => hostile(job, v, k, () => env.changed(job.record)));
    return;
  }
  switch (k.fail) {
    case 'reset-before-headers':
      later(job, k.firstTokenDelayMs, () => {
        job.cut = true;
        job.socket.resetAndDestroy();
      });
      return;
    case 'http-error':
      later(job, k.firstTokenDelayMs, () =>
        sendJson(job.res, k.errorStatus, errorBody(k.errorStatus, runnerErrorMessage(k.errorStatus))),
      );
      return;
    case 'html-500':
      later(job, k.firstTokenDelayMs, () => sendJson(job.res, 500, HTML_500, 'text/html'));
      return;
    case 'garbage':
      later(job, k.firstTokenDelayMs, () => {
        job.res.writeHead(200, SSE_HEADERS);
        job.res.write(GARBAGE);
        job.res.end();
      });
      return;
    default: {
      const plan = k.fail === 'none' ? planReply({ body: v.body, ...env.agent() }) : null;
      if (plan !== null) agentReply(job, v, k, plan, env);
      else if (v.stream) later(job, k.firstTokenDelayMs, () => stream(job, v, k, env));
      else nonStream(job, v, k);
    }
  }
}

function intervalMs(k: Readonly<Knobs>): number {
  if (k.tokensPerSecond > 0) return 1000 / k.tokensPerSecond;
  return k.fail === 'slow-drip' ? 1000 : 0;
}

function isMidStream(k: Readonly<Knobs>): boolean {
  return k.fail === 'hang-mid-stream' || k.fail === 'drop-mid-stream' || k.fail === 'eof-mid-stream';
}

function stream(job: Job, req: SimChatRequest, k: Readonly<Knobs>, env: ChatEnv): void {
  const { res, record } = job;
  const frames = new StreamFrames(completionId(), nowSeconds(), req.model);
  res.writeHead(200, SSE_HEADERS);
  if (k.fail === 'invalid-json') {
    res.end(frames.invalid());
    return;
  }
  const n = req.maxTokens !== null ? Math.min(req.maxTokens, k.chunks) : k.chunks;
  const limit = isMidStream(k) ? Math.min(k.failAfterChunks, n) : n;
  const interval = intervalMs(k);
  let i = 0;

  const end = (): void => {
    if (k.fail === 'hang-mid-stream') {
      res.flushHeaders();
    } else if (k.fail === 'drop-mid-stream') {
      res.flushHeaders();
      cutWhenFlushed(job);
    } else if (k.fail === 'eof-mid-stream') {
      res.end();
    } else {
      if (n === 0) res.write(frames.first(''));
      res.write(frames.finish(req.maxTokens !== null && req.maxTokens < k.chunks ? 'length' : 'stop'));
      if (req.includeUsage) res.write(frames.usage(countPromptTokens(req.messages), n));
      res.end(DONE_FRAME);
    }
  };

  const step = (): void => {
    if (job.done) return;
    while (i < limit) {
      const ok = res.write(i === 0 ? frames.first(tokenText(0)) : frames.content(tokenText(i)));
      record.chunksSent = ++i;
      env.changed(record);
      const held = i === 1 && i < limit ? env.held() : null;
      if (held !== null) {
        void held.then(() => {
          if (!job.done) step();
        });
        return;
      }
      if (i < limit) {
        if (interval > 0) {
          later(job, interval, step);
          return;
        }
        if (!ok) {
          res.once('drain', step);
          return;
        }
      }
    }
    end();
  };
  step();
}

function nonStream(job: Job, req: SimChatRequest, k: Readonly<Knobs>): void {
  const { res } = job;
  const full = req.maxTokens !== null ? Math.min(req.maxTokens, k.chunks) : k.chunks;
  const truncated = k.fail === 'eof-mid-stream'; // Ollama's silent abort: partial content, finish_reason null
  const n = truncated ? Math.min(k.failAfterChunks, full) : full;
  const interval = intervalMs(k);
  const body = completionBody({
    id: completionId(),
    created: nowSeconds(),
    model: req.model,
    content: contentOf(n),
    finishReason: truncated ? null : req.maxTokens !== null && req.maxTokens < k.chunks ? 'length' : 'stop',
    promptTokens: countPromptTokens(req.messages),
    completionTokens: n,
  });

  if (k.fail === 'slow-drip') {
    // Headers after the first token, then the body dripped in `n` pieces at the pace.
    later(job, k.firstTokenDelayMs, () => drip(job, Buffer.from(body), Math.max(2, n), interval));
    return;
  }
  // No headers before generation ends (Ollama's server/routes.go writes nothing before the first token): first token + the rest of the tokens.
  later(job, k.firstTokenDelayMs + Math.max(0, n - 1) * interval, () => {
    if (k.fail === 'drop-mid-stream') {
      const bytes = Buffer.from(body);
      res.writeHead(200, { 'Content-Type': JSON_CT, 'Content-Length': bytes.length });
      res.write(bytes.subarray(0, bytes.length >> 1));
      cutWhenFlushed(job);
    } else if (k.fail === 'invalid-json') {
      sendJson(res, 200, body.slice(0, body.length >> 1));
    } else {
      sendJson(res, 200, body);
    }
  });
}

function drip(job: Job, bytes: Buffer, pieces: number, interval: number): void {
  const { res } = job;
  const size = Math.ceil(bytes.length / pieces);
  let offset = 0;
  res.writeHead(200, { 'Content-Type': JSON_CT, 'Content-Length': bytes.length });
  const step = (): void => {
    const next = Math.min(bytes.length, offset + size);
    const piece = bytes.subarray(offset, next);
    offset = next;
    if (offset >= bytes.length) res.end(piece);
    else {
      res.write(piece);
      later(job, interval, step);
    }
  };
  step();
}

/** Tool calls, tool-result answers, reasoning and JSON replies, paced like any other. */
function agentReply(job: Job, req: SimChatRequest, k: Readonly<Knobs>, plan: AgentReply, env: ChatEnv): void {
  const meta = { id: completionId(), created: nowSeconds(), model: req.model, flavor: env.agent().flavor };
  const prompt = countPromptTokens(req.messages);
  if (!req.stream) {
    later(job, k.firstTokenDelayMs, () => sendJson(job.res, 200, agentCompletion(plan, meta, prompt)));
    return;
  }
  later(job, k.firstTokenDelayMs, () => {
    const { res, record } = job;
    const frames = agentFrames(plan, meta);
    if (req.includeUsage) {
      const completion = completionTokens(plan);
      const head = {
        id: meta.id,
        object: 'chat.completion.chunk',
        created: meta.created,
        model: meta.model,
        ...(meta.flavor === 'vllm' ? {} : { system_fingerprint: 'fp_ollama' }),
      };
      frames.push(
        `data: ${JSON.stringify({ ...head, choices: [], usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion } })}\n\n`,
      );
    }
    frames.push(DONE_FRAME);
    res.writeHead(200, SSE_HEADERS);
    const interval = intervalMs(k);
    let i = 0;
    const step = (): void => {
      while (!job.done && i < frames.length) {
        res.write(frames[i++]);
        record.chunksSent = i;
        env.changed(record);
        if (interval > 0 && i < frames.length) {
          later(job, interval, step);
          return;
        }
      }
      if (!job.done) res.end();
    };
    step();
  });
}
