import { describe, expect, it } from 'vitest';
import {
  ago,
  compactCount,
  daemonsSummary,
  duration,
  fit,
  packEnd,
  reasonText,
  whyNotReady,
  whyNotShort,
} from '../../cli/console/format.js';
import { osc52 } from '../../cli/console/clipboard.js';
import { flexWidths, windowStart } from '../../cli/console/components/table.js';

const NOW = Date.parse('2026-11-23T12:00:00Z');

describe('console formatting', () => {
  it('when a duration is formatted then it uses the two largest units', () => {
    expect(
      [59_000, 60_000, 59 * 60_000, 3_600_000 + 12 * 60_000, 26 * 3_600_000, 16 * 86_400_000 + 2 * 3_600_000].map(
        duration,
      ),
    ).toEqual(['<1m', '1m', '59m', '1h 12m', '1d 2h', '16d 2h']);
  });

  it('when a pack end is formatted then it shows the UTC time and what is left, or that it ended', () => {
    expect(packEnd(null, NOW)).toBe('-');
    expect(packEnd('2026-11-23T15:12:00.000Z', NOW)).toBe('11-23 15:12 3h 12m');
    expect(packEnd('2026-11-23T12:00:00.000Z', NOW)).toBe('11-23 12:00 ended');
  });

  it('when a past time is formatted then it is relative, and null is -, as the CLI says it', () => {
    expect(
      [null, '2026-11-23T11:59:30Z', '2026-11-23T11:55:00Z', '2026-11-23T09:00:00Z', '2026-11-20T12:00:00Z'].map((t) =>
        ago(t, NOW),
      ),
    ).toEqual(['-', 'just now', '5m ago', '3h ago', '3d ago']);
  });

  it('when an instance is not ready then the reason says what to do, and ready has none', () => {
    expect(whyNotReady({ id: 'g', state: 'ready' })).toBeNull();
    expect(whyNotReady({ id: 'g', state: 'pending' })).toBe(
      'g is pending, not ready yet: make it ready with `ob-proxy instances ready g`.',
    );
    expect(whyNotReady({ id: 'g', state: 'terminated' })).toBe(
      'g is terminated for good: it can never have keys again.',
    );
    expect(whyNotShort('failed')).toBe('failed, keys revoked');
    expect(reasonText('pack_ended')).toBe('pack ended');
    expect(reasonText(null)).toBe('');
  });

  it('when text is fitted then it is cut with an ellipsis or padded to the exact width, by characters', () => {
    expect(fit('gpu-1', 8)).toBe('gpu-1   ');
    expect(fit('a-long-id', 6)).toBe('a-lon…');
    expect(fit('ключ-ключ', 5)).toBe('ключ…');
    expect(fit('x', 0)).toBe('');
    expect(compactCount(9_999)).toBe('9999');
    expect(compactCount(31_337)).toBe('31k');
    expect(compactCount(2_500_000)).toBe('2.5M');
  });

  it('when the table lays out then flexible columns share what is left and the window keeps the selection in view', () => {
    expect(flexWidths(80, [12, 10, 18, 4], [2, 3])).toEqual([11, 17]);
    expect(windowStart(0, 30, 13)).toBe(0);
    expect(windowStart(20, 30, 13)).toBe(14);
    expect(windowStart(29, 30, 13)).toBe(17);
    expect(windowStart(3, 5, 13)).toBe(0);
  });

  it('when a secret is sent to the clipboard then it is one OSC 52 sequence of its base64', () => {
    expect(osc52('ob_sk_x')).toBe(`\u001b]52;c;${Buffer.from('ob_sk_x').toString('base64')}\u0007`);
  });
});

describe('daemonsSummary', () => {
  const d = (id: string, state: 'live' | 'gone', revocationsBehind: number | null) => ({
    id,
    self: false,
    host: 'h',
    pid: 1,
    startedAt: '',
    state,
    reportedAt: '',
    reportAgeMs: 0,
    appliedChange: 1,
    changeLag: 0,
    appliedRevocations: '7',
    revocationsBehind,
    lastInSyncAt: null,
  });
  it('says nothing on a store served alone, else how many daemons and which are behind or gone', () => {
    expect(daemonsSummary(undefined)).toBeNull();
    expect(daemonsSummary({ shared: false, newestRevocation: null, daemons: [] })).toBeNull();
    expect(
      daemonsSummary({
        shared: true,
        newestRevocation: '7',
        daemons: [d('aaaaaaaa-1', 'live', 0), d('bbbbbbbb-2', 'live', 0)],
      }),
    ).toEqual({ text: '2 daemons, all caught up', ok: true });
    expect(
      daemonsSummary({
        shared: true,
        newestRevocation: '9',
        daemons: [
          d('aaaaaaaa-1', 'live', 0),
          d('bbbbbbbb-2', 'live', 2),
          d('cccccccc-3', 'gone', 2),
          d('dddddddd-4', 'live', null),
        ],
      }),
    ).toEqual({ text: '4 daemons: 2 behind (bbbbbbbb, dddddddd), 1 gone (cccccccc)', ok: false });
    expect(daemonsSummary({ shared: true, newestRevocation: null, daemons: [], problem: 'timeout' })).toEqual({
      text: 'daemons: reports unreadable',
      ok: false,
    });
  });
});
