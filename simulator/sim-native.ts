/**
 * Ollama's own API, as Ollama v0.33 serves it (its server/routes.go ChatHandler, GenerateHandler,
 * EmbedHandler; api/types.go): `POST /api/chat` and `/api/generate`, streamed as NDJSON unless
 * told `"stream": false` (one JSON object a line, `application/x-ndjson`; the last line has
 * `done: true`, `done_reason` and the counts), plain as one object with no trailing newline (gin's
 * c.JSON); errors as `{"error":"…"}`. A request with no messages (or no prompt) only loads the
 * model: one bare `done_reason: "load"` object, whatever `stream` says. `POST /api/embed`
 * answers as an embedding model does, with a small deterministic vector per input.
 *
 * The knobs hold here too (chunks, pacing, first-token delay, `num_predict` as the cap), with
 * the failure modes that mean something on this wire: `http-error`, `hang`, the `*-mid-stream`
 * cuts, and `error-event` (Ollama's `{"error":…}` line after its 200, after `failAfterChunks`).
 */
import { createHash } from 'node:crypto';
import { sendJson } from './sim-chat.js';
import { type ChatEnv, type Job, type ParsedBody } from './sim-job.js';
import { resolveKnobs } from './sim-directives.js';
import { type LoadedModels, goTime, nativeError } from './sim-native-info.js';
import { later, writeFrames } from './sim-pacing.js';
import { countPromptTokens, runnerErrorMessage, tokenText } from './sim-responses.js';
import type { Knobs } from './sim-types.js';

type Json = Record<string, unknown>;

const GIN_JSON_CT = 'application/json; charset=utf-8';
const NDJSON_HEADERS = { 'Content-Type': 'application/x-ndjson' };

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function goType(v: unknown): string {
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'boolean') return 'bool';
  if (isObject(v)) return 'object';
  return typeof v;
}

type Typed = [field: string, goTypeName: string, ok: (v: unknown) => boolean];

const STRING: Typed[1] = 'string';
const isString = (v: unknown): boolean => typeof v === 'string';
const COMMON: Typed[] = [
  ['stream', 'bool', (v) => typeof v === 'boolean'],
  ['options', 'map[string]interface {}', isObject],
];
const CHAT_FIELDS: Typed[] = [['model', STRING, isString], ['messages', '[]api.Message', Array.isArray], ...COMMON];
const GENERATE_FIELDS: Typed[] = [['model', STRING, isString], ['prompt', STRING, isString], ...COMMON];
const EMBED_FIELDS: Typed[] = [['model', STRING, isString]];

/** Go's decoding of the request into `struct`, then the model's presence: the body, or answered. */
function decode(job: Job, parsed: ParsedBody, env: ChatEnv, struct: string, fields: Typed[]): Json | null {
  if (!parsed.ok) {
    nativeError(job.res, 400, parsed.message);
    return null;
  }
  const body = parsed.value;
  if (!isObject(body)) {
    nativeError(job.res, 400, `json: cannot unmarshal ${goType(body)} into Go value of type api.${struct}`);
    return null;
  }
  for (const [field, type, ok] of fields) {
    const v = body[field];
    if (v === undefined || v === null || ok(v)) continue;
    nativeError(
      job.res,
      400,
      `json: cannot unmarshal ${goType(v)} into Go struct field ${struct}.${field} of type ${type}`,
    );
    return null;
  }
  const model = typeof body.model === 'string' ? body.model : '';
  if (model === '') {
    nativeError(job.res, 400, 'model is required');
    return null;
  }
  if (!env.hasModel(model)) {
    nativeError(job.res, 404, `model '${model}' not found`);
    return null;
  }
  return body;
}

/** `options.num_predict` as Ollama's runner takes it: its integer part; negative, no cap. */
function numPredict(job: Job, options: unknown): number | null | undefined {
  const v = isObject(options) ? options.num_predict : undefined;
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number') {
    nativeError(job.res, 500, 'option "num_predict" must be of type integer');
    return undefined;
  }
  return v < 0 ? null : Math.max(1, Math.floor(v));
}

/** What one generation says, apart from its text. */
interface Generation {
  model: string;
  /** `message` (chat) or `response` (generate). */
  text: (t: string) => string;
  /** Generate's done line also gives the token ids of prompt and answer, to continue from (`context`). */
  context: boolean;
}

const chatText = (t: string): string => `"message":{"role":"assistant","content":${JSON.stringify(t)}}`;
const generateText = (t: string): string => `"response":${JSON.stringify(t)}`;

/** Made-up token ids, one per token of prompt and answer. */
function contextIds(n: number): string {
  return `[${Array.from({ length: n }, (_, i) => 100 + i).join(',')}]`;
}

function doneLine(g: Generation, reason: string, prompt: number, completion: number, text: string): string {
  const ns = 1_000_000;
  return (
    `{"model":${JSON.stringify(g.model)},"created_at":"${goTime()}",${g.text(text)},"done":true,` +
    `"done_reason":"${reason}",${g.context ? `"context":${contextIds(prompt + completion)},` : ''}"total_duration":${(prompt + completion + 2) * ns},"load_duration":${ns},` +
    `"prompt_eval_count":${prompt},"prompt_eval_duration":${prompt * ns},"eval_count":${completion},` +
    `"eval_duration":${completion * ns}}`
  );
}

/** The generation of `n` tokens (of the knobs' chunks, cut at `cap`), plain or streamed. */
function generate(
  job: Job,
  env: ChatEnv,
  g: Generation,
  k: Knobs,
  stream: boolean,
  cap: number | null,
  prompt: number,
): void {
  if (k.fail === 'hang' || (k.fail === 'hang-mid-stream' && !stream)) return;
  if (k.fail === 'http-error') {
    later(job, k.firstTokenDelayMs, () => nativeError(job.res, k.errorStatus, runnerErrorMessage(k.errorStatus)));
    return;
  }
  const n = cap === null ? k.chunks : Math.min(cap, k.chunks);
  const reason = cap !== null && cap < k.chunks ? 'length' : 'stop';
  if (!stream) {
    let text = '';
    for (let i = 0; i < n; i++) text += tokenText(i);
    later(job, k.firstTokenDelayMs, () => sendJson(job.res, 200, doneLine(g, reason, prompt, n, text), GIN_JSON_CT));
    return;
  }
  const m = JSON.stringify(g.model);
  const frames: string[] = [];
  const upTo = k.fail === 'error-event' ? Math.min(k.failAfterChunks, n) : n;
  for (let i = 0; i < upTo; i++)
    frames.push(`{"model":${m},"created_at":"${goTime()}",${g.text(tokenText(i))},"done":false}\n`);
  if (k.fail === 'error-event') frames.push(`${JSON.stringify({ error: runnerErrorMessage(500) })}\n`);
  else frames.push(`${doneLine(g, reason, prompt, n, '')}\n`);
  later(job, k.firstTokenDelayMs, () => writeFrames(job, frames, k, env, NDJSON_HEADERS));
}

/** No messages, or no prompt: the model is loaded, and that is the whole answer. */
function loadOnly(job: Job, g: Generation): void {
  const body = `{"model":${JSON.stringify(g.model)},"created_at":"${goTime()}",${g.text('')},"done":true,"done_reason":"load"}`;
  sendJson(job.res, 200, body, GIN_JSON_CT);
}

export function handleNativeChat(job: Job, parsed: ParsedBody, env: ChatEnv, loaded: LoadedModels): void {
  const body = decode(job, parsed, env, 'ChatRequest', CHAT_FIELDS);
  if (body === null) return;
  const cap = numPredict(job, body.options);
  if (cap === undefined) return;
  loaded.touch(body.model as string);
  const g = { model: body.model as string, text: chatText, context: false };
  const messages = Array.isArray(body.messages) ? body.messages : [];
  if (messages.length === 0) {
    loadOnly(job, g);
    return;
  }
  const k = resolveKnobs(env.knobs(), messages);
  generate(job, env, g, k, body.stream !== false, cap, countPromptTokens(messages));
}

export function handleNativeGenerate(job: Job, parsed: ParsedBody, env: ChatEnv, loaded: LoadedModels): void {
  const body = decode(job, parsed, env, 'GenerateRequest', GENERATE_FIELDS);
  if (body === null) return;
  const cap = numPredict(job, body.options);
  if (cap === undefined) return;
  loaded.touch(body.model as string);
  const g = { model: body.model as string, text: generateText, context: true };
  const prompt = typeof body.prompt === 'string' ? body.prompt : '';
  if (prompt === '') {
    loadOnly(job, g);
    return;
  }
  const messages = [{ role: 'user', content: prompt }];
  const k = resolveKnobs(env.knobs(), messages);
  generate(job, env, g, k, body.stream !== false, cap, countPromptTokens(messages));
}

/** A unit vector of 8 numbers drawn from the input's hash: the same input, the same embedding. */
function embedding(input: string): number[] {
  const h = createHash('sha256').update(input).digest();
  const v = Array.from({ length: 8 }, (_, i) => (h[i] as number) - 127.5);
  const norm = Math.hypot(...v);
  return v.map((x) => Math.round((x / norm) * 1e6) / 1e6);
}

export function handleNativeEmbed(job: Job, parsed: ParsedBody, env: ChatEnv, loaded: LoadedModels): void {
  const body = decode(job, parsed, env, 'EmbedRequest', EMBED_FIELDS);
  if (body === null) return;
  const input = body.input;
  const inputs = typeof input === 'string' ? [input] : Array.isArray(input) ? input : null;
  if (inputs === null || !inputs.every((s) => typeof s === 'string')) {
    nativeError(job.res, 400, 'invalid input type');
    return;
  }
  loaded.touch(body.model as string);
  const words = countPromptTokens(inputs.map((content) => ({ content })));
  const k = env.knobs();
  if (k.fail === 'http-error') {
    nativeError(job.res, k.errorStatus, runnerErrorMessage(k.errorStatus));
    return;
  }
  const answer =
    `{"model":${JSON.stringify(body.model)},"embeddings":${JSON.stringify(inputs.map((s) => embedding(s as string)))},` +
    `"total_duration":2000000,"load_duration":1000000,"prompt_eval_count":${words}}`;
  later(job, k.firstTokenDelayMs, () => sendJson(job.res, 200, answer, GIN_JSON_CT));
}
