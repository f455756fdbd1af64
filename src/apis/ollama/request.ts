import { checkFieldNames, fieldSet, parseJsonBody } from '../../wire/json-body.js';
import { type Media, addMedia, noMedia } from '../../wire/media.js';
import { type Json, given, invalid, isObject, optionalBoolean } from '../../wire/request-checks.js';

/**
 * The gates of Ollama's own API (`POST /api/chat`, `/api/generate`, `/api/embed`, `/api/show`;
 * docs/contract.md §3b): they read the model, the stream flag and `options.num_predict` (the cap
 * the tokens per minute reserve), and refuse those alone, naming the field in `param`. Images are
 * counted for the prompt estimate, never refused. Messages, prompts, formats, tools, `think`,
 * `keep_alive` and every other option are Ollama's to judge: the client's bytes go upstream as
 * they came (an alias of the instance's model rewritten to the model, as on every route). There is
 * no id in Ollama's answers to rewrite, and a stream reports its usage unasked, in its last line.
 */
export interface OllamaRequest {
  model: string;
  /** Ollama streams unless told `"stream": false` (null and absent stream alike). */
  stream: boolean;
  media: Media;
  /** `options.num_predict` as Ollama reads it, or null: no cap (absent, or negative). */
  completionCap: number | null;
  /** `options.temperature` and `options.top_p` when numbers, or null: for traces. */
  temperature: number | null;
  topP: number | null;
}

/*
 * The top-level fields each gate reads: Ollama decodes its requests with Go's encoding/json, which
 * takes a key differing only by case for the field (`"Stream": false`), so such a key is refused
 * (json-body.ts). The keys of `options` are not checked so: Ollama reads them from a map, by
 * their exact names (`"NUM_PREDICT"` is ignored by it, not taken for `num_predict`).
 */
const CHAT = fieldSet(['model', 'stream', 'options', 'messages']);
const GENERATE = fieldSet(['model', 'stream', 'options', 'images']);
const EMBED = fieldSet(['model']);
const SHOW = fieldSet(['model', 'name']);

function parseWith(read: ReturnType<typeof fieldSet>): (raw: Buffer) => Json {
  return (raw) => {
    const { body } = parseJsonBody(raw);
    checkFieldNames(body, read.fields, read.folded, '');
    return body;
  };
}

/** The body as every decoder reads it, or 400 invalid_json (json-body.ts). */
export const parseOllamaChatBody = parseWith(CHAT);
export const parseOllamaGenerateBody = parseWith(GENERATE);
export const parseOllamaEmbedBody = parseWith(EMBED);
export const parseOllamaShowBody = parseWith(SHOW);

function requiredModel(v: unknown, field = 'model'): string {
  if (!given(v)) invalid(field, `${field} is required: name the model of your deployment.`);
  if (typeof v !== 'string' || v === '') invalid(field, `${field} must be a non-empty string.`);
  return v;
}

/**
 * `options.num_predict` as a cap: Ollama takes any number and drops its fraction, answers one
 * token for 0, and generates without a cap for a negative one (-1, until it stops; -2, until the
 * context fills). Anything else it refuses (a 500 for a string), so the gate refuses it first.
 */
function numPredict(options: Json): number | null {
  const v = options.num_predict;
  if (!given(v)) return null;
  if (typeof v !== 'number' || !Number.isFinite(v))
    invalid('options.num_predict', 'options.num_predict must be a number: the most tokens to generate.');
  if (v < 0) return null;
  return Math.min(Number.MAX_SAFE_INTEGER, Math.max(1, Math.floor(v)));
}

/** What both generating routes read: the stream flag and the options. */
function generation(model: string, body: Json, media: Media): OllamaRequest {
  optionalBoolean(body.stream, 'stream');
  const options = body.options;
  if (given(options) && !isObject(options)) invalid('options', 'options must be an object of model options.');
  const o = isObject(options) ? options : {};
  return {
    model,
    stream: body.stream !== false,
    media,
    completionCap: numPredict(o),
    temperature: typeof o.temperature === 'number' ? o.temperature : null,
    topP: typeof o.top_p === 'number' ? o.top_p : null,
  };
}

/** Base64 images in a list (`images` of a chat turn or of a generate request), for the estimate. */
function countImages(images: unknown, media: Media): void {
  if (!Array.isArray(images)) return;
  for (const image of images) addMedia(media, image);
}

export function validateOllamaChat(body: Json): OllamaRequest {
  const model = requiredModel(body.model);
  const media = noMedia();
  if (Array.isArray(body.messages)) for (const m of body.messages) if (isObject(m)) countImages(m.images, media);
  return generation(model, body, media);
}

export function validateOllamaGenerate(body: Json): OllamaRequest {
  const model = requiredModel(body.model);
  const media = noMedia();
  countImages(body.images, media);
  return generation(model, body, media);
}

/** An embedding generates nothing: its cost is its input, reported as `prompt_eval_count`. */
export function validateOllamaEmbed(body: Json): OllamaRequest {
  return {
    model: requiredModel(body.model),
    stream: false,
    media: noMedia(),
    completionCap: 0,
    temperature: null,
    topP: null,
  };
}

/**
 * The model a show request names: `model`, or the older `name` that Ollama still reads when
 * `model` is empty. Returns the field it came from too, where an alias is rewritten.
 */
export function showModel(body: Json): { model: string; field: 'model' | 'name' } {
  if (typeof body.model === 'string' && body.model !== '') return { model: body.model, field: 'model' };
  if (given(body.model) && typeof body.model !== 'string') invalid('model', 'model must be a string.');
  if (given(body.name)) return { model: requiredModel(body.name, 'name'), field: 'name' };
  return { model: requiredModel(body.model), field: 'model' };
}
