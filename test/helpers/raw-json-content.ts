/**
 * Generated JSON string content for the wire layer's property tests: raw text between the quotes
 * with escapes good and bad, control characters and quotes, and whether a text parses as JSON.
 */
import fc from 'fast-check';

/** True when `s` is JSON. */
export function parses(s: string): boolean {
  try {
    JSON.parse(s);
    return true;
  } catch {
    return false;
  }
}

// Raw text between the quotes: printable characters, escapes good and bad, control characters, quotes.
export const rawContent = fc
  .array(
    fc.oneof(
      fc.string({ maxLength: 4 }),
      fc.constantFrom(
        '\\n',
        '\\"',
        '\\\\',
        '\\u00e9',
        '\\uZZZZ',
        '\\x',
        '\\',
        '"',
        '\n',
        '\t',
        '\u0001',
        'é',
        '😀',
        '}',
        ']',
      ),
    ),
    { maxLength: 6 },
  )
  .map((parts) => parts.join(''));
