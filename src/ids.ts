import { customAlphabet } from 'nanoid';

const alnum = customAlphabet('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz', 24);

/** Our own completion id: Ollama's `chatcmpl-<0..998>` collides (protocol.md §1.3). */
export function completionId(): string {
  return `chatcmpl-${alnum()}`;
}

export function requestId(): string {
  return `req_${alnum()}`;
}
