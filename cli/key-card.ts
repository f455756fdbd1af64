import type { KeyView } from '../src/wire/views.js';
import { clipped } from '../src/printable.js';
import { formatLimits } from './limit-options.js';
import { UsageError } from './usage-error.js';

/** One key as `keys show` prints it and the console's key card shows it: the same rows, the same words. */

const UNIT_S: Record<string, number> = { s: 1, m: 60, h: 3_600, d: 86_400, w: 604_800 };
const GRACE_MAX_S = 30 * 86_400;

/** `--grace`: a duration (`30m`, `1h`, `1d12h`), or 0 for none; at most 30 days. */
export function parseGrace(raw: string): number {
  const text = raw.trim();
  if (text === '0') return 0;
  const m = /^((?:\d+[smhdw])+)$/.exec(text);
  let s = 0;
  if (m !== null) for (const [, n, unit] of m[1]!.matchAll(/(\d+)([smhdw])/g)) s += Number(n) * UNIT_S[unit!]!;
  if (m === null || s > GRACE_MAX_S)
    throw new UsageError(`--grace must be a duration up to 30 days (90s, 30m, 1h, 1d12h) or 0, got "${clipped(raw)}".`);
  return s;
}

/** A key's state in words: active, active until its rotation's grace ends, or revoked and why. */
export function stateText(k: KeyView): string {
  if (k.status === 'revoked') return `revoked at ${k.revokedAt ?? '?'} (${k.revokeReason ?? '?'})`;
  return k.revokeAt === undefined ? 'active' : `active until ${k.revokeAt}, then revoked (rotated)`;
}

/** Label and value, never the secret: the daemon does not keep it. */
export function keyCardRows(k: KeyView): [string, string][] {
  const u = k.usage;
  return [
    ['id', k.id],
    ['name', k.name],
    ['instance', k.instance],
    ['state', stateText(k)],
    ['hint', k.hint],
    ['default', k.isDefault ? (k.revealable ? 'yes (unrevealed)' : 'yes') : 'no'],
    ['limits', formatLimits(k.limits) === '-' ? 'none' : formatLimits(k.limits)],
    ['created', k.createdAt],
    ['first used', u.firstUsedAt ?? '-'],
    ['last used', k.lastUsedAt ?? '-'],
    ['requests', String(u.requests)],
    [
      'tokens',
      `${u.promptTokens} prompt, ${u.completionTokens} completion (${u.reasoningTokens} reasoning, ${u.estimatedTokens} estimated)`,
    ],
    ['errors', String(u.errors)],
    ['disconnects', String(u.disconnects)],
  ];
}
