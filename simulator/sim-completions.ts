/**
 * `POST /v1/completions`, legacy text completions, as Ollama serves it (its openai/openai.go
 * CompletionRequest, ToCompletion and ToCompleteChunk, behind middleware/openai.go's
 * CompletionsMiddleware): Go's decoding (`prompt` a string only, wrong types refused with the
 * decoder's sentence), an unknown model 404, `cmpl-<0..998>` ids, a plain answer with the
 * encoder's trailing newline, and a stream of `data:` chunks whose keys come in the struct's
 * order (`id, object, created, choices, model, system_fingerprint`), a last chunk with empty text
 * and the finish reason, then `data: [DONE]`. With `stream_options.include_usage` every chunk
 * carries a zero usage and a last `choices: []` chunk the real one. `suffix` (fill-in-the-middle)
 * is served, as a code model does.
 */
import { sendJson } from './sim-chat.js';
import { type ChatEnv, type Job, type ParsedBody, type SimChatRequest } from './sim-job.js';
import { resolveKnobs } from './sim-directives.js';
import { HOSTILE_MODES, hostile } from './sim-hostile.js';
import { later, writeFrames } from './sim-pacing.js';
import { countPromptTokens, errorBody, nowSeconds, runnerErrorMessage, tokenText } from './sim-responses.js';

type Json = Record<string, unknown>;

const GIN_JSON_CT = 'application/json; charset=utf-8';

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function goType(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'boolean') return 'bool';
  if (isObject(v)) return 'object';
  return typeof v;
}

/** Go's decoder on CompletionRequest's typed fields, in the struct's order. */
const TYPED: [string, string, (v: unknown) => boolean][] = [
  ['model', 'string', (v) => typeof v === 'string'],
  ['prompt', 'string', (v) => typeof v === 'string'],
  ['frequency_penalty', 'float32', (v) => typeof v === 'number'],
  ['max_tokens', 'int', (v) => typeof v === 'number' && Number.isInteger(v)],
  ['presence_penalty', 'float32', (v) => typeof v === 'number'],
  ['seed', 'int', (v) => typeof v === 'number' && Number.isInteger(v)],
  ['stream', 'bool', (v) => typeof v === 'boolean'],
  ['temperature', 'float32', (v) => typeof v === 'number'],
  ['top_p', 'float32', (v) => typeof v === 'number'],
  ['suffix', 'string', (v) => typeof v === 'string'],
];

function usage(prompt: number, completion: number): string {
  return `{"prompt_tokens":${prompt},"completion_tokens":${completion},"total_tokens":${prompt + completion}}`;
}

/** Answers one legacy completion request whose body has been read and recorded. */
export function handleCompletions(job: Job, parsed: ParsedBody, env: ChatEnv): void {
  if (!parsed.ok) {
    sendJson(job.res, 400, errorBody(400, parsed.message).trimEnd(), GIN_JSON_CT);
    return;
  }
  const body = parsed.value;
  if (!isObject(body)) {
    sendJson(
      job.res,
      400,
      errorBody(400, `json: cannot unmarshal ${goType(body)} into Go value of type openai.CompletionRequest`).trimEnd(),
      GIN_JSON_CT,
    );
    return;
  }
  for (const [field, type, ok] of TYPED) {
    const v = body[field];
    if (v === undefined || v === null || ok(v)) continue;
    const message = `json: cannot unmarshal ${goType(v)} into Go struct field CompletionRequest.${field} of type ${type}`;
    sendJson(job.res, 400, errorBody(400, message).trimEnd(), GIN_JSON_CT);
    return;
  }
  const model = typeof body.model === 'string' ? body.model : '';
  if (!env.hasModel(model)) {
    sendJson(job.res, 404, errorBody(404, `model '${model}' not found`));
    return;
  }
  const prompt = typeof body.prompt === 'string' ? body.prompt : '';
  const messages = [{ role: 'user', content: prompt }];
  const k = resolveKnobs(env.knobs(), messages);
  const stream = body.stream === true;
  const maxTokens = typeof body.max_tokens === 'number' ? body.max_tokens : null;
  if (k.fail === 'hang' || (k.fail === 'hang-mid-stream' && !stream)) return;
  if (k.fail === 'http-error') {
    sendJson(job.res, k.errorStatus, errorBody(k.errorStatus, runnerErrorMessage(k.errorStatus)));
    return;
  }
  if (HOSTILE_MODES.has(k.fail)) {
    const req: SimChatRequest = { model, body, messages, stream, includeUsage: false, maxTokens };
    hostile(job, req, k, () => env.changed(job.record));
    return;
  }
  const n = maxTokens !== null ? Math.min(maxTokens, k.chunks) : k.chunks;
  const finish = maxTokens !== null && maxTokens < k.chunks ? 'length' : 'stop';
  const promptTokens = countPromptTokens(messages) + (typeof body.suffix === 'string' ? 1 : 0);
  const id = `cmpl-${Math.floor(Math.random() * 999)}`;
  const created = nowSeconds();
  const m = JSON.stringify(model);
  if (!stream) {
    let text = '';
    for (let i = 0; i < n; i++) text += tokenText(i);
    const answer =
      `{"id":"${id}","object":"text_completion","created":${created},"model":${m},"system_fingerprint":"fp_ollama",` +
      `"choices":[{"text":${JSON.stringify(text)},"index":0,"finish_reason":"${finish}"}],"usage":${usage(promptTokens, n)}}\n`;
    later(job, k.firstTokenDelayMs, () => sendJson(job.res, 200, answer));
    return;
  }
  const so = body.stream_options;
  const withUsage = isObject(so) && so.include_usage === true;
  const zero = withUsage ? `,"usage":${usage(0, 0)}` : '';
  const chunk = (choices: string, tail: string): string =>
    `data: {"id":"${id}","object":"text_completion","created":${created},"choices":${choices},"model":${m},"system_fingerprint":"fp_ollama"${tail}}\n\n`;
  const frames: string[] = [];
  for (let i = 0; i < n; i++)
    frames.push(chunk(`[{"text":${JSON.stringify(tokenText(i))},"index":0,"finish_reason":null}]`, zero));
  frames.push(chunk(`[{"text":"","index":0,"finish_reason":"${finish}"}]`, zero));
  if (withUsage) frames.push(chunk('[]', `,"usage":${usage(promptTokens, n)}`));
  frames.push('data: [DONE]\n\n');
  later(job, k.firstTokenDelayMs, () => writeFrames(job, frames, k, env));
}
