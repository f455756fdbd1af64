import type { Command } from 'commander';
import { clipped } from '../src/printable.js';
import { type KeyLimits, LIMIT_NAMES } from '../src/domain/key.js';
import { LIMIT_MAX } from '../src/domain/validate.js';
import { UsageError } from './usage-error.js';

const HELP: Record<keyof KeyLimits, string> = {
  rpm: 'requests per minute',
  tpm: 'tokens per minute (prompt + completion, as the model server reports them)',
  concurrency: 'requests answered at once',
};

/** --rpm, --tpm, --concurrency; `none` (keys limit) removes a limit. */
export function withLimitOptions(cmd: Command, none: boolean): Command {
  for (const name of LIMIT_NAMES)
    cmd.option(`--${name} <${none ? 'n|none' : 'n'}>`, `${HELP[name]}${none ? '; none removes the limit' : ''}`);
  return cmd;
}

/** The limits given on the command line: a flag absent is left out, `none` is null. */
export function limitsFrom(o: Partial<Record<keyof KeyLimits, string>>): Partial<KeyLimits> {
  const out: Partial<KeyLimits> = {};
  for (const name of LIMIT_NAMES) {
    const raw = o[name];
    if (raw === undefined) continue;
    if (raw === 'none') {
      out[name] = null;
      continue;
    }
    const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
    if (!Number.isSafeInteger(n) || n < 1 || n > LIMIT_MAX)
      throw new UsageError(`--${name} must be a whole number from 1 to ${LIMIT_MAX}, or none; got "${clipped(raw)}".`);
    out[name] = n;
  }
  return out;
}

/** `rpm 60 · tpm 10000 · concurrency 2`, or `-` when the key has none. */
export function formatLimits(limits: KeyLimits | undefined): string {
  if (limits === undefined) return '-';
  const set = LIMIT_NAMES.filter((n) => limits[n] !== null).map((n) => `${n} ${String(limits[n])}`);
  return set.length === 0 ? '-' : set.join(' · ');
}
