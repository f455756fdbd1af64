import { randomFillSync } from 'node:crypto';

const ALNUM = Buffer.from('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz');
const ID_LEN = 24;
/** Room before each id for its prefix (`chatcmpl-` is the longest). */
const PREFIX_ROOM = 16;
const SLOT = PREFIX_ROOM + ID_LEN;
const POOL_IDS = 256;
const pool = Buffer.allocUnsafe(SLOT * POOL_IDS);
let next = POOL_IDS;

/**
 * A prefix and 24 random base62 characters (about 143 bits), two per request on the proxy's path.
 * Random bytes are drawn 256 ids at a time and mapped in place (byte % 62: a slight bias, harmless
 * in an identifier that is not a secret); nanoid's unbiased alphabet drew bytes per id and cost
 * 2.6 µs per request id in profiles. The prefix is copied into the room before the id, so the id
 * is one flat one-byte string: a `${prefix}${id}` concatenation is a rope that every later reader
 * (the usage log's byte writer, JSON.stringify, a header) flattens again.
 */
function withPrefix(prefix: string): string {
  if (prefix.length > PREFIX_ROOM) return prefix + withPrefix('');
  if (next === POOL_IDS) {
    randomFillSync(pool);
    for (let i = 0; i < pool.length; i++) pool[i] = ALNUM[(pool[i] as number) % 62] as number;
    next = 0;
  }
  const idAt = next++ * SLOT + PREFIX_ROOM;
  const start = idAt - prefix.length;
  for (let i = 0; i < prefix.length; i++) pool[start + i] = prefix.charCodeAt(i);
  return pool.toString('latin1', start, idAt + ID_LEN);
}

/** Our own completion id: Ollama's `chatcmpl-<0..998>` collides (Ollama's middleware/openai.go draws it from 0 to 998). */
export function completionId(): string {
  return withPrefix('chatcmpl-');
}

export function requestId(): string {
  return withPrefix('req_');
}

/** `<prefix>_` and a random id: the ids of a Responses object and its items (`resp`, `msg`, `rs`, `fc`, `call`). */
export function prefixedId(prefix: string): string {
  return withPrefix(`${prefix}_`);
}

/** Our own Responses API id (the model server's may collide, and would name its store's response). */
export function responseId(): string {
  return withPrefix('resp_');
}

/** Our own legacy text completion id (Ollama's `cmpl-<0..998>` collides). */
export function textCompletionId(): string {
  return withPrefix('cmpl-');
}

/** Our own Anthropic message id (the model server's may collide). */
export function messageId(): string {
  return withPrefix('msg_');
}
