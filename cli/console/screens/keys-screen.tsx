/**
 * Keys of one instance: name, hint, status, default or not, created, last used, requests and
 * tokens (prompt/completion). Never a secret: the daemon does not keep them.
 *
 *   Keys of gpu-1 (gemma4:26b, ready) · ← → other instance
 *   NAME        HINT         STATUS    DEF CREATED  LAST USED REQS  TOKENS
 * › ci-bot      ob_sk_…a1B2  active    no  5m ago   just now     3  42/311
 *   default     ob_sk_…Zz09  active    yes 2h ago   never        0  0/0
 *
 *   ci-bot · id 3fA9kQ2mXz1B · created 2026-11-23T04:00:12.000Z
 *   3 requests · 42 in / 311 out · 0 reasoning · 0 errors · 0 left early
 *     chat: 2 requests · 30 in / 200 out
 *     responses: 1 request · 12 in / 111 out
 *   Of those tokens 12 are estimates: the model server never reported them.
 *   Limits: 60 requests/min · no token limit · 4 at once
 *   x revokes it (asks first).
 *
 * The limits line shows when the daemon sends `limits` (per-key limits); older daemons do not.
 * The estimates line shows when some of the key's tokens were charged by estimate. The lines
 * under the counters split them by the client API the requests came through, one per route used.
 */
import { Box } from 'ink';
import { Text } from '../components/text.js';
import type { InstanceView, KeyView } from '../../../src/wire/views.js';
import { type Column, Table, flexWidths } from '../components/table.js';
import { ago, compactCount, reasonText, secondsUtc } from '../format.js';
import { stateTone, useTone } from '../theme.js';

export interface KeysScreenProps {
  instance: InstanceView | undefined;
  keys: KeyView[];
  selected: number;
  width: number;
  height: number;
  now: number;
  /** `keys 1-9 of many · PgDn next page`, when the list takes more than one page. */
  position?: string | null;
}

/** Per-key limits, when the daemon has them: numbers, null for none. */
interface KeyLimits {
  rpm: number | null;
  tpm: number | null;
  concurrency: number | null;
}

function limitsOf(k: KeyView): KeyLimits | null {
  const l = (k as KeyView & { limits?: Partial<KeyLimits> | null }).limits;
  if (l === undefined || l === null || typeof l !== 'object') return null;
  const n = (v: unknown): number | null => (typeof v === 'number' && Number.isFinite(v) ? v : null);
  return { rpm: n(l.rpm), tpm: n(l.tpm), concurrency: n(l.concurrency) };
}

export function limitsText(l: KeyLimits): string {
  if (l.rpm === null && l.tpm === null && l.concurrency === null) return 'none';
  return [
    l.rpm === null ? 'no request limit' : `${l.rpm} requests/min`,
    l.tpm === null ? 'no token limit' : `${compactCount(l.tpm)} tokens/min`,
    l.concurrency === null ? 'no concurrency limit' : `${l.concurrency} at once`,
  ].join(' · ');
}

export function usageText(k: KeyView): string {
  const u = k.usage;
  // An older daemon sends only the first three counters.
  const errors = u.errors ?? 0;
  return `${compactCount(u.requests)} request${u.requests === 1 ? '' : 's'} · ${compactCount(u.promptTokens)} in / ${compactCount(u.completionTokens)} out`
    + ` · ${compactCount(u.reasoningTokens ?? 0)} reasoning · ${compactCount(errors)} error${errors === 1 ? '' : 's'} · ${compactCount(u.disconnects ?? 0)} left early`;
}

/** The key's usage by route (chat, responses, ...), a line per route used; none from an older daemon. */
export function routeLines(k: KeyView): string[] {
  const byRoute = (k.usage as Partial<KeyView['usage']>).byRoute ?? {};
  return Object.keys(byRoute).map((route) => {
    const r = byRoute[route]!;
    return `  ${route}: ${compactCount(r.requests)} request${r.requests === 1 ? '' : 's'} · ${compactCount(r.promptTokens)} in / ${compactCount(r.completionTokens)} out`;
  });
}

/** The tokens charged by estimate, when there are any (older daemons send none). */
export function estimateText(k: KeyView): string | null {
  const n = k.usage.estimatedTokens ?? 0;
  return n > 0 ? `Of those tokens ${compactCount(n)} are estimates: the model server never reported them.` : null;
}

export function KeysScreen({ instance, keys, selected, width, height, now, position = null }: KeysScreenProps) {
  const tone = useTone();
  if (instance === undefined) {
    return <Text color={tone('muted')}>No instance chosen: pick one on the Instances pane (1) and press Enter.</Text>;
  }
  const [nameW] = flexWidths(width, [12, 8, 3, 8, 9, 5, 11], [1], 8) as [number];
  const columns: Column[] = [
    { title: 'NAME', width: nameW }, { title: 'HINT', width: 12 }, { title: 'STATUS', width: 8 }, { title: 'DEF', width: 3 },
    { title: 'CREATED', width: 8 }, { title: 'LAST USED', width: 9 }, { title: 'REQS', width: 5 }, { title: 'TOKENS', width: 11 },
  ];
  const rows = keys.map((k) => [
    { text: k.name, bold: true }, { text: k.hint },
    { text: k.status, tone: k.status === 'active' ? ('good' as const) : ('bad' as const) },
    { text: k.isDefault ? 'yes' : 'no' }, { text: ago(k.createdAt, now) }, { text: ago(k.lastUsedAt, now) },
    { text: compactCount(k.usage.requests).padStart(5) },
    { text: `${compactCount(k.usage.promptTokens)}/${compactCount(k.usage.completionTokens)}` },
  ]);
  const current = keys[selected];
  const limits = current === undefined ? null : limitsOf(current);
  const estimate = current === undefined ? null : estimateText(current);
  const routes = current === undefined ? [] : routeLines(current);
  return (
    <Box flexDirection="column">
      <Text wrap="truncate">
        Keys of <Text bold>{instance.id}</Text> ({instance.model}, <Text color={tone(stateTone(instance.state))}>{instance.state}</Text>)
        <Text color={tone('muted')}> · ← → other instance</Text>
      </Text>
      <Table columns={columns} rows={rows} selected={selected} height={height - (estimate === null ? 6 : 7) - routes.length - (position === null ? 0 : 1)}
        empty={instance.state === 'ready' ? 'No keys yet: n generates one.' : 'No keys.'} />
      {position === null ? null : <Text wrap="truncate" color={tone('muted')}>{`  ${position}`}</Text>}
      {current === undefined ? null : (
        <Box flexDirection="column" marginTop={1}>
          <Text wrap="truncate">{`  ${current.name} · id ${current.id} · created ${secondsUtc(current.createdAt)} UTC`}</Text>
          <Text wrap="truncate">{`  ${usageText(current)}`}</Text>
          {routes.map((line) => <Text key={line} wrap="truncate">{`  ${line}`}</Text>)}
          {estimate === null ? null : <Text wrap="truncate">{`  ${estimate}`}</Text>}
          {limits === null ? null : <Text wrap="truncate">{`  Limits: ${limitsText(limits)}`}</Text>}
          {current.status === 'revoked'
            ? <Text wrap="truncate" color={tone('bad')}>{`  Revoked ${current.revokedAt === null ? '' : secondsUtc(current.revokedAt) + ' UTC'}: ${reasonText(current.revokeReason)}.`}</Text>
            : current.revealable
              ? <Text wrap="truncate" color={tone('warn')}>  Its secret was never shown: r reveals it, once. x revokes it (asks first).</Text>
              : <Text wrap="truncate" color={tone('muted')}>  Enter shows it, l sets its limits, o rotates it, x revokes it (asks first).</Text>}
        </Box>
      )}
    </Box>
  );
}
