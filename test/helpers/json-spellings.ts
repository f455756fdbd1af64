/**
 * JSON written the ways model servers write it: the same value with its strings' characters raw
 * in UTF-8, as `\u` escapes in either case, Go's `\u003c` for `<>&`, `\/`, lone surrogates
 * escaped; with compact or Python's spaced separators. A relay that rewrites an event must give the
 * same value whatever the spelling.
 */

/** A JSON value. */
export type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

/** How a server writes a string's characters: each choice is valid JSON for the same value. */
export type Style = 'raw' | 'ascii' | 'mixed';

const SHORT: Record<string, string> = {
  '"': '\\"',
  '\\': '\\\\',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\b': '\\b',
  '\f': '\\f',
};
const u = (c: number, upper: boolean): string =>
  `\\u${c.toString(16).padStart(4, '0')[upper ? 'toUpperCase' : 'toLowerCase']()}`;

/** A JSON string literal for `s`; `pick` chooses among the valid spellings of each code unit. */
export function encodeString(s: string, style: Style, pick: () => number): string {
  let out = '"';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ch = s[i] as string;
    const hi = c >= 0xd800 && c <= 0xdbff;
    const pair = hi && i + 1 < s.length && s.charCodeAt(i + 1) >= 0xdc00 && s.charCodeAt(i + 1) <= 0xdfff;
    if (hi || (c >= 0xdc00 && c <= 0xdfff)) {
      if (!pair || style === 'ascii' || (style === 'mixed' && pick() % 2 === 0)) {
        // A lone surrogate can only be written escaped; a pair either way.
        out += u(c, pick() % 2 === 0);
        if (pair) out += u(s.charCodeAt(++i), false);
      } else {
        out += s.slice(i, i + 2);
        i++;
      }
      continue;
    }
    const short = SHORT[ch];
    if (c < 0x20 || short !== undefined) {
      out += short !== undefined && (style !== 'mixed' || pick() % 3 !== 0) ? short : u(c, false);
      continue;
    }
    const escapeIt = style === 'ascii' ? c > 0x7e || '<>&'.includes(ch) : style === 'mixed' && pick() % 4 === 0;
    if (escapeIt) out += u(c, pick() % 2 === 0);
    else if (ch === '/' && style === 'mixed' && pick() % 2 === 0) out += '\\/';
    else out += ch;
  }
  return `${out}"`;
}

/**
 * JSON text for `v`, its strings in `style`; keys in insertion order, as servers write them;
 * `spaced`: with Python's `json.dumps` separators (`, ` and `: `).
 */
export function encodeJson(v: Json, style: Style, pick: () => number, spaced = false): string {
  if (typeof v === 'string') return encodeString(v, style, pick);
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  const comma = spaced ? ', ' : ',';
  if (Array.isArray(v)) return `[${v.map((x) => encodeJson(x, style, pick, spaced)).join(comma)}]`;
  return `{${Object.entries(v)
    .map(([k, x]) => `${encodeString(k, style, pick)}${spaced ? ': ' : ':'}${encodeJson(x, style, pick, spaced)}`)
    .join(comma)}}`;
}
