/**
 * Records per statement of a copy (`store migrate`): one JSON text of a few MB. The whole table
 * as one text was past V8's longest string at about 950,000 keys, and one statement past the
 * pools' time-out.
 */
export const IMPORT_PIECE = 10_000;

/** The records as JSON arrays of IMPORT_PIECE each. */
export function* pieces(records: readonly unknown[]): Generator<string> {
  for (let i = 0; i < records.length; i += IMPORT_PIECE) yield JSON.stringify(records.slice(i, i + IMPORT_PIECE));
}
