import { isUtf8 } from 'node:buffer';

const ID_KEY = '"id"';

/**
 * A plain Responses answer with our id, as the model server's own bytes with the id spliced in,
 * instead of the parsed object encoded again; null when that cannot be shown to be the same JSON
 * value as re-encoding `parsed` with `parsed.id` set to `id` (the caller re-encodes then).
 * `text` is `raw` decoded, `parsed` is `text` parsed, already judged a response object.
 *
 * The answer must begin `{"id":"` with the id as parsed written plainly (ASCII, no escapes), so
 * the bytes replaced are the top-level id's value. No other `id` key may follow at the top (the
 * client, taking the last of a repeated key, would read the server's id): every `"id"` in the
 * text must be a key that parsed, counted as the top-level one and the output items' own (the
 * only places a response has an `id`). A repeated key parses into one, and a string value
 * `"id"` is no key, so either makes the text hold more `"id"` than that count; an id spelled
 * with an escape (`"\u0069d"`) sends it the slow way too. Bytes that are not UTF-8 go the slow
 * way, which re-encodes what decoding repaired.
 */
export function spliceResponseId(
  raw: Buffer,
  text: string,
  parsed: Record<string, unknown>,
  id: string,
): Buffer | null {
  if (!text.startsWith('{"id":"')) return null;
  const end = text.indexOf('"', 7);
  if (end === -1 || parsed.id !== text.slice(7, end)) return null;
  for (let i = 7; i < end; i++) if (text.charCodeAt(i) > 0x7f) return null;
  if (text.includes('\\u0069', end) || text.includes('\\u0064', end)) return null;
  let keys = 1;
  const output = parsed.output;
  if (Array.isArray(output))
    for (const item of output as unknown[])
      if (typeof item === 'object' && item !== null && Object.hasOwn(item, 'id')) keys++;
  let seen = 1;
  for (let at = text.indexOf(ID_KEY, end); at !== -1; at = text.indexOf(ID_KEY, at + ID_KEY.length)) {
    if (++seen > keys) return null;
  }
  if (seen !== keys || !isUtf8(raw)) return null;
  return Buffer.concat([Buffer.from(`{"id":"${id}`, 'latin1'), raw.subarray(end)]);
}
