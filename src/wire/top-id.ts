import { isUtf8 } from 'node:buffer';
import { encodeJson } from './chat-response.js';
import { mayRepeatId } from './completion-splice.js';

/**
 * A model server's plain answer (`raw`, decoded as `text`, parsed as `parsed`) with its top-level
 * `id` replaced by ours, and nothing else changed: the server's own bytes with our id spliced in
 * where the id is its first key, written without escapes, and its only `id` key (docs: the
 * `spliceCompletionId` rule); otherwise the parsed object encoded again, its trailing newline
 * kept. Null when it nests too deeply to be encoded again.
 */
export function withTopId(
  raw: Buffer,
  text: string,
  parsed: Record<string, unknown>,
  id: string,
): Buffer | string | null {
  if (text.startsWith('{"id":"')) {
    const end = text.indexOf('"', 7);
    if (end !== -1 && parsed.id === text.slice(7, end) && !mayRepeatId(text, end) && ascii(text, 7, end) && isUtf8(raw))
      return Buffer.concat([Buffer.from(`{"id":"${id}`), raw.subarray(end)]);
  }
  parsed.id = id;
  const encoded = encodeJson(parsed);
  if (encoded === null) return null;
  return text.endsWith('\n') ? `${encoded}\n` : encoded;
}

/** An ASCII id ends at the same offset in the bytes as in the text. */
function ascii(text: string, from: number, to: number): boolean {
  for (let i = from; i < to; i++) if (text.charCodeAt(i) > 0x7f) return false;
  return true;
}
