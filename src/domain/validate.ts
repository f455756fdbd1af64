import { looksLikeSecret } from './secret-shape.js';
import { type KeyLimits, LIMIT_NAMES } from './key.js';
import { obError } from '../errors.js';
import { isPrintable } from '../printable.js';

// Ids and names come from operators and scripts; refuse what would break a terminal, a path or a log.
// Names refuse exactly what the CLI and console would have to show escaped.
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

export function validateInstanceId(id: unknown): string {
  if (typeof id !== 'string' || !ID_RE.test(id)) {
    throw obError('invalid_argument', {
      param: 'id',
      message: 'Instance id must be 1-64 characters: letters, digits, and . _ : - (not first).',
    });
  }
  // An id is stored, logged and shown in clear, as a name is.
  if (looksLikeSecret(id))
    throw obError('invalid_argument', {
      param: 'id',
      message:
        "Instance id must not look like a key's secret (ob_sk_…, in any case): ids are stored and shown in clear.",
    });
  return id;
}

export const KEY_NAME_MAX = 64;

export function validateKeyName(name: unknown): string {
  if (typeof name !== 'string')
    throw obError('invalid_argument', { param: 'name', message: 'Key name is required: give --name.' });
  const trimmed = name.trim();
  if (trimmed === '') throw obError('invalid_argument', { param: 'name', message: 'Key name must not be empty.' });
  if ([...trimmed].length > KEY_NAME_MAX)
    throw obError('invalid_argument', {
      param: 'name',
      message: `Key name must be at most ${KEY_NAME_MAX} characters.`,
    });
  if (!isPrintable(trimmed))
    throw obError('invalid_argument', {
      param: 'name',
      message: 'Key name must not contain control or invisible characters.',
    });
  // A name is stored, logged and shown in clear: a secret pasted into it would be too, and one
  // changed in case gives its casing back through its checksum.
  if (looksLikeSecret(trimmed))
    throw obError('invalid_argument', {
      param: 'name',
      message:
        "Key name must not contain a key's secret: names are stored and shown in clear. Give a name that says who uses the key.",
    });
  return trimmed;
}

/** An absolute path: the daemon resolves it, not the CLI's working directory. */
export function validateTokenFile(value: unknown): string {
  if (typeof value !== 'string' || !value.startsWith('/') || value.length > 1024 || !isPrintable(value)) {
    throw obError('invalid_argument', {
      param: 'upstreamTokenFile',
      message: "--upstream-token-file must be an absolute path to a file holding the model server's token.",
    });
  }
  return value;
}

/** Date.parse rolls 2030-02-30 over to March 2: check the day exists in its month, and the zone. */
function isCalendarDate(value: string): boolean {
  const [y, m, d] = value.slice(0, 10).split('-').map(Number) as [number, number, number];
  const day = new Date(Date.UTC(y, m - 1, d));
  const zone = /([+-])(\d{2}):(\d{2})$/.exec(value);
  const zoneOk = zone === null || (Number(zone[2]) <= 23 && Number(zone[3]) <= 59);
  return day.getUTCFullYear() === y && day.getUTCMonth() === m - 1 && day.getUTCDate() === d && zoneOk;
}

/** Strict ISO 8601 with a time zone, so "tomorrow" or a bare date never means something surprising. */
export function validateTimestamp(value: unknown, param: string): string {
  const iso = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;
  if (typeof value !== 'string' || !iso.test(value) || Number.isNaN(Date.parse(value)) || !isCalendarDate(value)) {
    throw obError('invalid_argument', {
      param,
      message: `${param} must be an ISO 8601 time with a zone, e.g. 2026-12-01T18:00:00Z.`,
    });
  }
  return new Date(value).toISOString();
}

/** The largest limit accepted: far above any GPU's rate, and exact in a double. */
export const LIMIT_MAX = 1_000_000_000;

/**
 * A change of limits: each field absent (unchanged), null (no limit) or a whole number from 1.
 * Returns the limits after the change.
 */
export function validateLimits(input: unknown, current: KeyLimits): KeyLimits {
  const next: KeyLimits = { ...current };
  if (input === undefined || input === null) return next;
  if (typeof input !== 'object' || Array.isArray(input))
    throw obError('invalid_argument', {
      param: 'limits',
      message: 'Limits must be an object with rpm, tpm and concurrency.',
    });
  const o = input as Record<string, unknown>;
  for (const name of LIMIT_NAMES) {
    const v = o[name];
    if (v === undefined) continue;
    if (v !== null && (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1 || v > LIMIT_MAX)) {
      throw obError('invalid_argument', {
        param: name,
        message: `--${name} must be a whole number from 1 to ${LIMIT_MAX}, or none.`,
      });
    }
    next[name] = v;
  }
  return next;
}
