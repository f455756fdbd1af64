/**
 * src/printable.ts: what reaches a terminal from the store or the daemon shows control
 * characters as escapes; --json keeps the exact values.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isPrintable, printable, printableJson } from '../../src/printable.js';

// Independent of the module's regex: the characters the issue names, by code point.
const HOSTILE: number[] = [
  ...range(0x00, 0x1f),
  0x7f,
  ...range(0x80, 0x9f), // C0, DEL, C1 (0x9b is a one-byte CSI)
  ...range(0x202a, 0x202e),
  ...range(0x2066, 0x2069),
  0x200e,
  0x200f,
  0x061c, // bidi
  0x200b,
  0x200c,
  0x200d,
  0x2060,
  0xfeff,
  0x00ad, // zero-width, soft hyphen, BOM
  0x2028,
  0x2029,
  0xe0041, // line and paragraph separators, a tag character
];

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

/** True when any of the characters above is left raw. */
function raw(text: string): boolean {
  return [...text].some((c) => HOSTILE.includes(c.codePointAt(0)!));
}

describe('printable', () => {
  it('escapes every hostile character visibly', () => {
    for (const cp of HOSTILE) {
      const ch = String.fromCodePoint(cp);
      const out = printable(`a${ch}b`);
      expect(raw(out), `U+${cp.toString(16)}`).toBe(false);
      expect(out).toMatch(/^a\\.+b$/);
    }
  });

  it('writes ESC, C1, bidi and separators as \\x and \\u escapes', () => {
    expect(printable('\u001b]0;pwned\u0007\u001b[2J')).toBe('\\x1b]0;pwned\\x07\\x1b[2J');
    expect(printable('\u009b31m')).toBe('\\x9b31m');
    expect(printable('evil\u202egpj.exe')).toBe('evil\\u202egpj.exe');
    expect(printable('a\u2028b\u200bc')).toBe('a\\u2028b\\u200bc');
    expect(printable('x\u{e0041}')).toBe('x\\u{e0041}');
    expect(printable('line\none\ttab\r')).toBe('line\\none\\ttab\\r');
    expect(printable('lone \ud800 surrogate')).toBe('lone \\ud800 surrogate');
  });

  it('leaves ordinary text alone: accents, CJK, emoji, spaces', () => {
    for (const s of [
      'ci-bot',
      'Zoë’s notebook',
      '研究チーム',
      'rocket 🚀',
      'a b',
      'back\\slash',
      'http://10.0.0.5:11434',
    ]) {
      expect(printable(s)).toBe(s);
      expect(isPrintable(s)).toBe(true);
    }
  });

  it('for any string: nothing hostile survives, and escaping twice changes nothing more', () => {
    const unit = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.constantFrom(...HOSTILE.map((c) => String.fromCodePoint(c))),
      fc.constant('\ud800'),
    );
    fc.assert(
      fc.property(
        fc.array(unit).map((parts) => parts.join('')),
        (s) => {
          const out = printable(s);
          expect(raw(out)).toBe(false);
          expect(isPrintable(out)).toBe(true);
          expect(printable(out)).toBe(out);
          expect(isPrintable(s)).toBe(out === s);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('printableJson', () => {
  it('is the same JSON value, with nothing hostile left raw in the text', () => {
    const unit = fc.oneof(
      fc.string({ unit: 'binary' }),
      fc.constantFrom(...HOSTILE.map((c) => String.fromCodePoint(c))),
    );
    const value = fc.dictionary(
      fc.array(unit).map((p) => p.join('')),
      fc.oneof(
        fc.array(unit).map((p) => p.join('')),
        fc.integer(),
        fc.constant(null),
      ),
    );
    fc.assert(
      fc.property(value, (v) => {
        const text = printableJson({ list: [v] }, 2);
        expect(JSON.parse(text)).toEqual(JSON.parse(JSON.stringify({ list: [v] })));
        // The pretty-printer's own newlines are the only control characters left.
        expect(raw(text.replaceAll('\n', ''))).toBe(false);
      }),
      { numRuns: 300 },
    );
  });

  it('writes C1 and bidi characters as \\u escapes', () => {
    expect(printableJson({ name: 'a\u009bb\u202ec\u{e0041}' })).toBe('{"name":"a\\u009bb\\u202ec\\udb40\\udc41"}');
  });
});
