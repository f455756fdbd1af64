/**
 * Regression (fuzzing): `--pack-ends 2030-02-30T00:00:00Z` was accepted and silently
 * became 2030-03-02, because Date.parse rolls impossible days over. A pack end is money: a date
 * that does not exist is now refused with the usual sentence.
 */
import { expect, it } from 'vitest';
import { validateTimestamp } from '../../src/domain/validate.js';

it('days that do not exist, and zones out of range, are refused', () => {
  for (const v of [
    '2030-02-30T00:00:00Z',
    '2030-02-29T00:00:00Z',
    '2030-04-31T12:00:00Z',
    '2030-01-01T00:00:00+24:00',
    '2030-01-01T00:00:00+05:60',
  ]) {
    expect(() => validateTimestamp(v, 'packEndsAt'), v).toThrow(
      'packEndsAt must be an ISO 8601 time with a zone, e.g. 2026-12-01T18:00:00Z.',
    );
  }
});

it('real dates, leap days and offsets still pass, normalised to UTC', () => {
  expect(validateTimestamp('2028-02-29T10:00:00Z', 'p')).toBe('2028-02-29T10:00:00.000Z');
  expect(validateTimestamp('2030-12-31T23:30:00-01:00', 'p')).toBe('2031-01-01T00:30:00.000Z');
  expect(validateTimestamp('2030-06-30T08:00+02:00', 'p')).toBe('2030-06-30T06:00:00.000Z');
});
