import { randomFillSync } from 'node:crypto';

const ALNUM = Buffer.from('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz');
const ID_LEN = 24;
const POOL_IDS = 256;
const pool = Buffer.allocUnsafe(ID_LEN * POOL_IDS);
let next = POOL_IDS;

/**
 * 24 random base62 characters (about 143 bits), two per request on the proxy's path. Random
 * bytes are drawn 256 ids at a time and mapped in place (byte % 62: a slight bias, harmless in
 * an identifier that is not a secret); nanoid's unbiased alphabet drew bytes per id and cost
 * 2.6 µs per request id in profiles.
 */
function randomId(): string {
  if (next === POOL_IDS) {
    randomFillSync(pool);
    for (let i = 0; i < pool.length; i++) pool[i] = ALNUM[(pool[i] as number) % 62] as number;
    next = 0;
  }
  const at = next++ * ID_LEN;
  return pool.toString('latin1', at, at + ID_LEN);
}

/** Our own completion id: Ollama's `chatcmpl-<0..998>` collides (Ollama's middleware/openai.go draws it from 0 to 998). */
export function completionId(): string {
  return `chatcmpl-${randomId()}`;
}

export function requestId(): string {
  return `req_${randomId()}`;
}

/** `<prefix>_` and a random id: the ids of a Responses object and its items (`resp`, `msg`, `rs`, `fc`, `call`). */
export function prefixedId(prefix: string): string {
  return `${prefix}_${randomId()}`;
}

/** Our own Responses API id (the model server's may collide, and would name its store's response). */
export function responseId(): string {
  return `resp_${randomId()}`;
}

/** Our own legacy text completion id (Ollama's `cmpl-<0..998>` collides). */
export function textCompletionId(): string {
  return `cmpl-${randomId()}`;
}

/** Our own Anthropic message id (the model server's may collide). */
export function messageId(): string {
  return `msg_${randomId()}`;
}
