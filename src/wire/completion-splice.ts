import { isUtf8 } from 'node:buffer';
import { MAX_CHOICES } from './chat-response.js';

/**
 * The fast path of normalisation to docs/contract.md §3.3 for a non-streaming answer: when the model server's
 * answer already has the guaranteed shape, the client gets the server's own bytes with our id
 * spliced in, instead of the parsed object spread and stringified again (and encoded again).
 * `text` is `raw` decoded, `parsed` is `text` parsed. Returns null whenever normalizeCompletion
 * would change anything but the id (then it must run): the answer is the same JSON either way.
 * Bytes that are not valid UTF-8 go the slow way too, which re-encodes what decoding repaired.
 */
export function spliceCompletionId(raw: Buffer, text: string, parsed: unknown, id: string): Buffer | null {
  if (!isRecord(parsed) || !text.startsWith('{"id":"')) return null;
  const end = text.indexOf('"', 7);
  // The id as written must be the id as parsed (no escapes), and appear once: a second "id"
  // key, written plain or with escapes (or one in a nested object, such as a tool call's),
  // sends us to the slow path.
  if (end === -1 || parsed.id !== text.slice(7, end) || mayRepeatId(text, end)) return null;
  if (parsed.object !== 'chat.completion' || !Number.isSafeInteger(parsed.created)) return null;
  if (typeof parsed.model !== 'string' || parsed.model === '' || !Array.isArray(parsed.choices)) return null;
  // Past the cap normalizeCompletion refuses the answer: so must this.
  if (parsed.choices.length > MAX_CHOICES) return null;
  for (const c of parsed.choices as unknown[]) {
    if (!isRecord(c) || typeof c.index !== 'number' || c.finish_reason === undefined) return null;
    const m = c.message;
    if (!isRecord(m) || typeof m.role !== 'string' || (typeof m.content !== 'string' && m.content !== null))
      return null;
  }
  // An ASCII id ends at the same offset in the bytes as in the text.
  for (let i = 7; i < end; i++) if (text.charCodeAt(i) > 0x7f) return null;
  if (!isUtf8(raw)) return null;
  return Buffer.concat([Buffer.from(`{"id":"${id}`), raw.subarray(end)]);
}

/**
 * Whether `text` may hold the key `id` after `from`: as `"id"`, or spelled with an escape
 * (`"\u0069d"`, `"i\u0064"`; JSON has no other way to write a letter). The parser here and the
 * client's both take the last of a repeated key, so with a second `id` after the one we splice
 * over, the client read the server's id (the same value as the first, or another).
 */
export function mayRepeatId(text: string, from: number): boolean {
  return text.includes('"id"', from) || text.includes('\\u0069', from) || text.includes('\\u0064', from);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
