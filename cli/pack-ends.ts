import { ObProxyError } from '../src/errors.js';
import { clipped } from '../src/printable.js';
import { validateTimestamp } from '../src/domain/validate.js';
import { UsageError } from './usage-error.js';

const UNIT_MS: Record<string, number> = { s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 };

/**
 * `--pack-ends`: an ISO 8601 time with a zone, or a duration from now (`+8h`, `+30d`, `+1d12h`).
 * Checked here, so a typo is a usage error naming the flag, not the daemon's refusal naming a
 * JSON field; the daemon still checks it against its own clock.
 */
export function parsePackEnds(raw: string, now: number): string {
  const duration = /^\+((?:\d+[smhdw])+)$/.exec(raw.trim());
  if (duration !== null) {
    let ms = 0;
    for (const [, n, unit] of duration[1]!.matchAll(/(\d+)([smhdw])/g)) ms += Number(n) * UNIT_MS[unit!]!;
    if (ms <= 0 || !Number.isSafeInteger(now + ms) || now + ms > 8.64e15)
      throw new UsageError(`--pack-ends ${raw} is not a duration ob-proxy can use: give one from +1m to some years.`);
    return new Date(now + ms).toISOString();
  }
  let at: string;
  try {
    at = validateTimestamp(raw, '--pack-ends');
  } catch (err) {
    if (!(err instanceof ObProxyError)) throw err;
    throw new UsageError(
      `--pack-ends must be an ISO 8601 time with a zone (2026-12-01T18:00:00Z) or a duration from now (+8h, +30d, +90m), got "${clipped(raw)}".`,
    );
  }
  if (Date.parse(at) <= now)
    throw new UsageError(`--pack-ends ${raw} is in the past: give a later time, or a duration from now such as +8h.`);
  return at;
}
