import { isUtf8 } from 'node:buffer';
import { obError } from '../errors.js';

/**
 * Deepest nesting of objects and arrays a request body may have. Tool schemas nest a dozen
 * levels; thousands of levels only serve to overflow a recursive encoder or decoder somewhere
 * between the client and the GPU.
 */
export const MAX_DEPTH = 64;

type Json = Record<string, unknown>;

/**
 * Parses a request body as the model server will read it, or refuses it (400 invalid_json).
 *
 * The proxy checks the body as JSON.parse sees it and forwards the client's bytes, so the two
 * readings must agree. JSON.parse keeps the last of duplicate keys silently, while other decoders
 * keep the first, fail, or (Go's encoding/json, which Ollama uses) keep the last *case-insensitive*
 * match. Duplicates are refused here, at any depth; keys that differ only by case are refused
 * where the model server decodes into fixed fields (`checkFieldNames`). Bytes that are not UTF-8
 * are refused too: decoders repair them differently.
 */
export function parseJsonBody(raw: Buffer): { body: Json; text: string } {
  if (raw.length === 0)
    throw obError('invalid_json', { message: 'The request body is empty. Send a JSON chat completion request.' });
  if (!isUtf8(raw))
    throw obError('invalid_json', { message: 'The request body is not valid UTF-8. Send JSON encoded as UTF-8.' });
  const text = raw.toString('utf8');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw obError('invalid_json', { message: `The request body is not valid JSON (${(err as Error).message}).` });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw obError('invalid_json', { message: 'The request body must be a JSON object.' });
  }
  const written = scanMembers(text);
  if (written < 0) {
    throw obError('invalid_json', {
      message: `The request body nests objects or arrays deeper than ${MAX_DEPTH} levels. Flatten it.`,
    });
  }
  // Every member written in the text survives JSON.parse unless its key repeats in its object.
  if (countMembers(parsed, 0) !== written) {
    throw obError('invalid_json', {
      message:
        'The request body repeats a key inside one object. Send each key once: decoders disagree on which copy counts.',
    });
  }
  return { body: parsed as Json, text };
}

/**
 * The number of object members written in `text` (a valid JSON document): one per colon outside
 * strings. Returns -1 past MAX_DEPTH. Strings are skipped with indexOf, so a megabyte of base64
 * image costs a memchr, not a loop.
 */
function scanMembers(text: string): number {
  let members = 0;
  let depth = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) {
      let j = text.indexOf('"', i + 1);
      // A quote preceded by an odd run of backslashes is escaped.
      for (;;) {
        let k = j - 1;
        while (text.charCodeAt(k) === 92) k--;
        if ((j - 1 - k) % 2 === 0) break;
        j = text.indexOf('"', j + 1);
      }
      i = j;
    } else if (c === 58) {
      members++;
    } else if (c === 123 || c === 91) {
      if (++depth > MAX_DEPTH) return -1;
    } else if (c === 125 || c === 93) {
      depth--;
    }
  }
  return members;
}

/** Members of every object in a parsed value; depth is bounded by scanMembers first. */
function countMembers(v: unknown, acc: number): number {
  if (typeof v !== 'object' || v === null) return acc;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) acc = countMembers(v[i], acc);
    return acc;
  }
  for (const k in v) acc = countMembers((v as Json)[k], acc + 1);
  return acc;
}

/**
 * Unicode simple case folding as Go's encoding/json matches field names (bytes.EqualFold): the
 * Kelvin sign matches k, the long s matches s. Upper then lower folds both; it also folds a few
 * pairs Go does not (ß and ss), which can only refuse more.
 */
export function foldKey(key: string): string {
  return key.toUpperCase().toLowerCase();
}

/**
 * Refuses a key of `obj` that a case-insensitive decoder would take for one of `fields` (the
 * fields the model server decodes at this position), or for another key of the same object.
 * Keys of free-form objects (JSON schemas, metadata) are the client's own and are not checked.
 */
export function checkFieldNames(
  obj: Json,
  fields: ReadonlySet<string>,
  folded: ReadonlyMap<string, string>,
  path: string,
): void {
  // Folds of the unknown keys only: a known field is its own fold, and an unknown key folding onto
  // a known name is refused below whether or not that field is present. Most bodies hold known
  // fields alone, so nothing is allocated for them.
  let seen: Set<string> | null = null;
  for (const key in obj) {
    if (fields.has(key)) continue;
    const f = foldKey(key);
    const known = folded.get(f);
    const at = path === '' ? key : `${path}.${key}`;
    if (known !== undefined) {
      throw obError('invalid_json', {
        param: at,
        message: `"${at}" differs from the field "${known}" only by case. Send the field as "${known}".`,
      });
    }
    if (seen?.has(f) === true) {
      throw obError('invalid_json', {
        param: at,
        message: `"${at}" differs from another key of the same object only by case. Send each key once.`,
      });
    }
    (seen ??= new Set()).add(f);
  }
}

/** A field set and its folded index, built once per position. */
export function fieldSet(names: readonly string[]): {
  fields: ReadonlySet<string>;
  folded: ReadonlyMap<string, string>;
} {
  return { fields: new Set(names), folded: new Map(names.map((n) => [foldKey(n), n])) };
}

/** What ES2023's lib does not declare yet: JSON.parse with source text, and raw JSON (Node ≥ 21). */
const RawJson = JSON as unknown as {
  rawJSON(text: string): object;
  isRawJSON(v: unknown): boolean;
  parse(text: string, reviver: (key: string, value: unknown, context: { source?: string }) => unknown): unknown;
};

/**
 * `rewritten` (a body changed after validation) as JSON, with each number written as the client
 * wrote it in `raw` wherever the value is the same. JSON.stringify writes a number as JavaScript
 * holds it: a seed of 9007199254740993 went upstream as …992 and 1e400 as null, which the model
 * server reads otherwise than the client's own bytes. Only rewritten bodies pay for this.
 */
export function stringifyExact(raw: Buffer, rewritten: Json): string {
  const exact = RawJson.parse(raw.toString('utf8'), (_key, value, context) =>
    typeof value === 'number' && context.source !== undefined ? RawJson.rawJSON(context.source) : value,
  );
  return JSON.stringify(graftNumbers(rewritten, exact));
}

/** `v` with each number replaced by the raw number at the same place in `exact`, when it has that value. */
function graftNumbers(v: unknown, exact: unknown): unknown {
  if (typeof v === 'number') {
    if (RawJson.isRawJSON(exact) && Number(JSON.parse((exact as { rawJSON: string }).rawJSON)) === v) return exact;
    return v;
  }
  if (typeof v !== 'object' || v === null) return v;
  const ex = typeof exact === 'object' && exact !== null ? (exact as Record<string, unknown>) : {};
  if (Array.isArray(v)) return v.map((x, i) => graftNumbers(x, Array.isArray(exact) ? exact[i] : undefined));
  // No prototype: a client's "__proto__" key is copied as a key, as JSON.parse made it.
  const out = Object.create(null) as Json;
  for (const k of Object.keys(v)) out[k] = graftNumbers((v as Json)[k], Object.hasOwn(ex, k) ? ex[k] : undefined);
  return out;
}
