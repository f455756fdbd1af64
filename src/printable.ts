import { withoutSecrets } from './domain/secret-shape.js';

/**
 * Text that reaches a person's terminal from the store or the daemon (names, ids, endpoints,
 * hints, error messages echoing them) may hold anything: a hand-edited store, one written by an
 * older version, a daemon's message quoting what it refused. A terminal acts on control
 * characters (ESC and C1 sequences clear the screen or set the window title), and bidi overrides,
 * zero-width and line-separator characters make a name read as something else. Such characters
 * are shown as visible escapes instead; --json output keeps the exact values.
 */

// Cc: C0, DEL and C1 (U+009B is a one-byte CSI). Cf: bidi controls, zero-width characters,
// soft hyphen, BOM, tag characters. Zl/Zp: U+2028/U+2029. Cs: lone surrogates.
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu;
const ANY_UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/u;
const NAMED: Readonly<Record<string, string>> = { '\t': '\\t', '\n': '\\n', '\r': '\\r' };

function hex(n: number, width: number): string {
  return n.toString(16).padStart(width, '0');
}

function escapeOne(ch: string): string {
  const named = NAMED[ch];
  if (named !== undefined) return named;
  const cp = ch.codePointAt(0)!;
  if (cp <= 0xff) return `\\x${hex(cp, 2)}`;
  if (cp <= 0xffff) return `\\u${hex(cp, 4)}`;
  return `\\u{${hex(cp, 5)}}`;
}

/** `text` with every control, format and separator character as a visible escape (`\x1b`, `\u202e`). */
export function printable(text: string): string {
  return text.replace(UNSAFE, escapeOne);
}

/** True when `printable` would change nothing. */
export function isPrintable(text: string): boolean {
  return !ANY_UNSAFE.test(text);
}

// In JSON text these characters occur only inside strings: JSON's own syntax is ASCII.
const UNSAFE_IN_JSON = /[\u007f-\u009f\p{Cf}\p{Zl}\p{Zp}]/gu;

function jsonEscape(ch: string): string {
  let out = '';
  for (let i = 0; i < ch.length; i++) out += `\\u${hex(ch.charCodeAt(i), 4)}`;
  return out;
}

/**
 * JSON text with the characters JSON.stringify leaves raw (DEL, C1, bidi, zero-width,
 * separators) as \u escapes too: the same values to any parser, and nothing a terminal acts on
 * when printed.
 */
export function printableJsonText(json: string): string {
  return json.replace(UNSAFE_IN_JSON, jsonEscape);
}

export function printableJson(value: unknown, indent?: number): string {
  return printableJsonText(JSON.stringify(value, null, indent));
}

/** The most characters of a value an error message quotes. */
export const QUOTE_MAX = 120;

/**
 * A value as an error message quotes it: at most QUOTE_MAX characters, then `…`. A message that
 * quoted a refused value whole gave back a 100 KB model name or path, up to the body limit, as one
 * line on the operator's terminal and in the logs. Text that looks like a key's secret, in any
 * case, is never quoted (secret-shape.ts): every message that says back what it was given quotes
 * it through here.
 */
export function clipped(given: string): string {
  const value = withoutSecrets(given);
  if (value.length <= QUOTE_MAX) return value;
  // Not between the halves of a surrogate pair.
  const end = /[\uD800-\uDBFF]/.test(value.charAt(QUOTE_MAX - 1)) ? QUOTE_MAX - 1 : QUOTE_MAX;
  return `${value.slice(0, end)}…`;
}
