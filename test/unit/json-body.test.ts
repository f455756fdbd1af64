import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ObProxyError } from '../../src/errors.js';
import { parseChatBody } from '../../src/apis/chat/request.js';
import { MAX_DEPTH, parseJsonBody } from '../../src/wire/json-body.js';

/** A JSON value with every object member kept in order, duplicates included (unlike JSON.parse). */
type Pairs = null | boolean | number | string | Pairs[] | { pairs: [string, Pairs][] };

/** A small recursive-descent reader that keeps duplicates: the test's model of the wire. */
function readPairs(text: string): Pairs {
  let i = 0;
  const ws = (): void => {
    while (/\s/.test(text[i] ?? '')) i++;
  };
  const value = (): Pairs => {
    ws();
    const c = text[i];
    if (c === '{') {
      i++;
      const pairs: [string, Pairs][] = [];
      ws();
      if (text[i] === '}') {
        i++;
        return { pairs };
      }
      for (;;) {
        ws();
        const k = value() as string;
        ws();
        i++; // :
        pairs.push([k, value()]);
        ws();
        if (text[i++] === '}') return { pairs };
      }
    }
    if (c === '[') {
      i++;
      const out: Pairs[] = [];
      ws();
      if (text[i] === ']') {
        i++;
        return out;
      }
      for (;;) {
        out.push(value());
        ws();
        if (text[i++] === ']') return out;
      }
    }
    if (c === '"') {
      let j = i + 1;
      while (text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      const s = JSON.parse(text.slice(i, j + 1)) as string;
      i = j + 1;
      return s;
    }
    const m = /^(true|false|null|-?\d+(\.\d+)?([eE][+-]?\d+)?)/.exec(text.slice(i))!;
    i += m[0].length;
    return JSON.parse(m[0]) as Pairs;
  };
  return value();
}

/** Go's field-name matching (bytes.EqualFold) for the letters these tests use. */
const goFold = (s: string): string =>
  s
    .replace(/\u212A/g, 'k')
    .replace(/\u017F/g, 's')
    .toLowerCase();

/** What Go's encoding/json puts in a struct with these fields: exact match first, else a case-insensitive one; the last wins. */
function goStruct(v: Pairs, fields: readonly string[]): Record<string, Pairs> {
  const out: Record<string, Pairs> = {};
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return out;
  for (const [k, val] of v.pairs) {
    const f = fields.includes(k) ? k : fields.find((name) => goFold(name) === goFold(k));
    if (f !== undefined) out[f] = val;
  }
  return out;
}

/** The same fields as the proxy reads them. */
function jsStruct(v: Record<string, unknown>, fields: readonly string[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const f of fields) if (Object.hasOwn(v, f)) out[f] = v[f];
  return out;
}

const TOP = ['model', 'stream', 'temperature', 'top_p', 'max_tokens', 'n'] as const;
const ROLE = ['role', 'content'] as const;

const variant = (name: string): fc.Arbitrary<string> =>
  fc.oneof(
    { arbitrary: fc.constant(name), weight: 8 },
    fc.constant(name.toUpperCase()),
    fc.constant(name[0]!.toUpperCase() + name.slice(1)),
    fc.constant(name.replace(/k/g, '\u212A').replace(/s/g, '\u017F')),
  );
const scalar = fc.oneof(
  fc.constantFrom('gemma4:26b', 'llama3:70b'),
  fc.boolean(),
  fc.double({ min: -5, max: 60, noNaN: true }),
  fc.integer({ min: -1, max: 9 }),
  fc.constant(null),
);
const escapeSome = (k: string, on: boolean): string =>
  on
    ? JSON.stringify(k).replace(/[a-z]/, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`)
    : JSON.stringify(k);
const members = (names: readonly string[], value: fc.Arbitrary<string>) =>
  fc.array(
    fc
      .tuple(fc.constantFrom(...names).chain(variant), value, fc.boolean())
      .map(([k, v, esc]) => `${escapeSome(k, esc)}:${v}`),
    { maxLength: 5 },
  );

describe('parseChatBody: what the proxy checks is what a Go decoder reads', () => {
  it('for every body it accepts, Go and JSON.parse agree on every field the gate reads', () => {
    const message = fc
      .tuple(fc.boolean(), members(ROLE, fc.constantFrom('"user"', '"system"', '"hi"')))
      .map(([base, m]) => `{${[...(base ? ['"role":"user"', '"content":"x"'] : []), ...m].join(',')}}`);
    const body = fc
      .tuple(
        members(
          TOP,
          scalar.map((v) => JSON.stringify(v)),
        ),
        fc.array(message, { minLength: 1, maxLength: 2 }),
      )
      .map(([top, msgs]) => `{${[...top, `"messages":[${msgs.join(',')}]`].join(',')}}`);
    let accepted = 0;
    let refused = 0;
    fc.assert(
      fc.property(body, (text) => {
        let parsed: Record<string, unknown>;
        try {
          parsed = parseChatBody(Buffer.from(text));
        } catch (err) {
          expect(err).toBeInstanceOf(ObProxyError);
          expect((err as ObProxyError).code).toBe('invalid_json');
          refused++;
          return;
        }
        accepted++;
        const wire = readPairs(text);
        expect(goStruct(wire, TOP)).toEqual(jsStruct(parsed, TOP));
      }),
      { numRuns: 400, seed: 10 },
    );
    // Both branches were exercised, so the property is not vacuous.
    expect(accepted).toBeGreaterThan(20);
    expect(refused).toBeGreaterThan(20);
  });

  it('refuses two unknown keys of a fixed-field object that differ only by case (Ollama may know the field)', () => {
    const body = '{"model":"m","messages":[{"role":"user","content":"x"}],"think":false,"THINK":true}';
    expect(() => parseChatBody(Buffer.from(body))).toThrow(
      '"THINK" differs from another key of the same object only by case',
    );
    expect(
      parseChatBody(Buffer.from('{"model":"m","messages":[],"think":false,"metadata":{"A":"1","a":"2"}}')),
    ).toMatchObject({ think: false });
  });

  it('counts members outside strings only: colons, quotes and escapes inside strings change nothing', () => {
    const text = '{"a":"x:y\\"z:","b\\\\":{"c":[":",{"d":"\\\\"}]}}';
    expect(parseJsonBody(Buffer.from(text)).body).toEqual(JSON.parse(text));
    expect(() => parseJsonBody(Buffer.from('{"a":{"b":1,"b":2}}'))).toThrow('repeats a key');
    expect(() => parseJsonBody(Buffer.from('[{"b":1}]'))).toThrow('must be a JSON object');
  });

  it(`bounds nesting at ${MAX_DEPTH} levels, counting the body itself`, () => {
    const deep = (n: number): string => `{"a":${'['.repeat(n - 1)}${']'.repeat(n - 1)}}`;
    expect(() => parseJsonBody(Buffer.from(deep(MAX_DEPTH)))).not.toThrow();
    expect(() => parseJsonBody(Buffer.from(deep(MAX_DEPTH + 1)))).toThrow(`deeper than ${MAX_DEPTH} levels`);
  });
});
