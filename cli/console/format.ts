/**
 * Pure text formatting for the console: times, reasons, why an instance cannot take keys.
 * Absolute times are UTC, like every timestamp the CLI and the JSON output print.
 */
import type { InstanceView, StatusView } from '../../src/wire/views.js';
import type { RevokeReason } from '../../src/domain/key.js';
import stringWidth from 'string-width';
import { printable } from '../../src/printable.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** "3d 4h", "3h 12m", "12m", "<1m" */
export function duration(ms: number): string {
  if (ms < MINUTE) return '<1m';
  if (ms < HOUR) return `${Math.floor(ms / MINUTE)}m`;
  if (ms < DAY) return `${Math.floor(ms / HOUR)}h ${Math.floor((ms % HOUR) / MINUTE)}m`;
  return `${Math.floor(ms / DAY)}d ${Math.floor((ms % DAY) / HOUR)}h`;
}

/** "12-01 18:00" in UTC. */
export function shortUtc(iso: string): string {
  return iso.slice(5, 16).replace('T', ' ');
}

/** "11-23 04:00:12" in UTC. */
export function secondsUtc(iso: string): string {
  return iso.slice(5, 19).replace('T', ' ');
}

/** The pack end with the time left: "12-01 18:00 3h 12m", "12-01 18:00 ended", or "-" (as the CLI says it). */
export function packEnd(packEndsAt: string | null, now: number): string {
  if (packEndsAt === null) return '-';
  const left = Date.parse(packEndsAt) - now;
  return `${shortUtc(packEndsAt)} ${left <= 0 ? 'ended' : duration(left)}`;
}

/** "just now", "5m ago", "3h ago", "2d ago"; "-" for null (as the CLI says it). */
export function ago(iso: string | null, now: number): string {
  if (iso === null) return '-';
  const ms = now - Date.parse(iso);
  if (ms < MINUTE) return 'just now';
  if (ms < HOUR) return `${Math.floor(ms / MINUTE)}m ago`;
  if (ms < DAY) return `${Math.floor(ms / HOUR)}h ago`;
  return `${Math.floor(ms / DAY)}d ago`;
}

const REASONS: Record<RevokeReason, string> = {
  instance_stopped: 'instance stopped',
  instance_failed: 'instance failed',
  instance_terminated: 'instance terminated',
  instance_removed: 'instance removed',
  pack_ended: 'pack ended',
  manual: 'revoked by operator',
  rotated: 'replaced by a rotation',
};

export function reasonText(reason: RevokeReason | null): string {
  return reason === null ? '' : REASONS[reason];
}

/** Why keys cannot be created for this instance now; null when they can. */
export function whyNotReady(i: Pick<InstanceView, 'id' | 'state'>): string | null {
  switch (i.state) {
    case 'ready':
      return null;
    case 'pending':
      return `${i.id} is pending, not ready yet: make it ready with \`ob-proxy instances ready ${i.id}\`.`;
    case 'stopped':
      return `${i.id} is stopped and its keys were revoked: make it ready again to create keys.`;
    case 'failed':
      return `${i.id} failed and its keys were revoked: make it ready again to create keys.`;
    case 'terminated':
      return `${i.id} is terminated for good: it can never have keys again.`;
  }
}

/** The same, in a few words, for lists. */
export function whyNotShort(state: InstanceView['state']): string | null {
  switch (state) {
    case 'ready':
      return null;
    case 'pending':
      return 'not ready yet';
    case 'stopped':
      return 'stopped, keys revoked';
    case 'failed':
      return 'failed, keys revoked';
    case 'terminated':
      return 'terminated for good';
  }
}

const graphemes = new Intl.Segmenter('en', { granularity: 'grapheme' });

/**
 * Cuts to `width` display cells with an ellipsis; pads to exactly `width`. Escapes first
 * (src/printable.ts), so the width counts the escapes that will be drawn. Cells, not code points:
 * a CJK character or an emoji takes two, a combining mark none (measured as Ink measures them),
 * so a wide name cannot push the columns after it off the line.
 */
export function fit(text: string, width: number): string {
  if (width <= 0) return '';
  const safe = cut(text, width);
  return safe + ' '.repeat(width - stringWidth(safe));
}

/** The display cells `text` takes once escaped, as Text draws it. */
export function cells(text: string): number {
  return stringWidth(printable(text));
}

/**
 * At most `width` display cells, escaped, with an ellipsis when cut; never padded. For names
 * inside sentences: a name from a hand-edited store may be thousands of characters long.
 */
export function cut(text: string, width: number): string {
  if (width <= 0) return '';
  const safe = printable(text);
  if (stringWidth(safe) <= width) return safe;
  let kept = '';
  let used = 0;
  for (const { segment } of graphemes.segment(safe)) {
    const w = stringWidth(segment);
    if (used + w > width - 1) break;
    kept += segment;
    used += w;
  }
  return `${kept}…`;
}

export function compactCount(n: number): string {
  if (n < 10_000) return String(n);
  if (n < 1_000_000) return `${Math.round(n / 1000)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

/**
 * The daemons of a shared store in a few words, for the header: how many, and which are behind
 * on revocations or gone (as `ob-proxy status` lists them). Null on a store the daemon serves alone.
 */
export function daemonsSummary(daemons: StatusView['daemons']): { text: string; ok: boolean } | null {
  if (daemons?.shared !== true) return null;
  if (daemons.problem !== undefined) return { text: 'daemons: reports unreadable', ok: false };
  const name = (d: { id: string }): string => d.id.slice(0, 8);
  const behind = daemons.daemons.filter((d) => d.state === 'live' && (d.revocationsBehind ?? 1) > 0);
  const gone = daemons.daemons.filter((d) => d.state === 'gone');
  const parts = [
    ...(behind.length === 0 ? [] : [`${behind.length} behind (${behind.map(name).join(', ')})`]),
    ...(gone.length === 0 ? [] : [`${gone.length} gone (${gone.map(name).join(', ')})`]),
  ];
  const n = daemons.daemons.length;
  return {
    text: `${n} daemon${n === 1 ? '' : 's'}${parts.length === 0 ? ', all caught up' : `: ${parts.join(', ')}`}`,
    ok: parts.length === 0,
  };
}
