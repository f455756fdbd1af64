/**
 * Revocations: the audit trail of revoked keys, a page at a time in the order the daemon keeps
 * it (oldest first, so a page's cursor stays valid as keys are revoked): when, which key, which
 * instance, why.
 *
 *   WHEN (UTC)     KEY                       INSTANCE         WHY
 *   11-23 04:02:40 old-key (Zk3m1qP0aa2B)    gpu-1            revoked by operator
 * › 11-23 04:10:02 ci-bot (3fA9kQ2mXz1B)     gpu-1            instance stopped
 */
import { Box } from 'ink';
import { Text } from '../components/text.js';
import type { RevocationView } from '../../../src/wire/views.js';
import { type Column, Table, flexWidths } from '../components/table.js';
import { reasonText, secondsUtc } from '../format.js';
import { useTone } from '../theme.js';

export interface RevocationsScreenProps {
  revocations: RevocationView[];
  selected: number;
  width: number;
  height: number;
  /** `revocations 1-14 of many · PgDn next page`, when the trail takes more than one page. */
  position?: string | null;
}

export function RevocationsScreen({ revocations, selected, width, height, position = null }: RevocationsScreenProps) {
  const tone = useTone();
  const [keyW, instW] = flexWidths(width, [14, 19], [2, 1]) as [number, number];
  const columns: Column[] = [
    { title: 'WHEN (UTC)', width: 14 }, { title: 'KEY', width: keyW }, { title: 'INSTANCE', width: instW }, { title: 'WHY', width: 19 },
  ];
  const rows = revocations.map((r) => [
    { text: secondsUtc(r.revokedAt) }, { text: `${r.name} (${r.keyId})` }, { text: r.instance },
    { text: reasonText(r.reason), tone: r.reason === 'manual' ? ('warn' as const) : ('bad' as const) },
  ]);
  const current = revocations[selected];
  return (
    <Box flexDirection="column">
      <Table columns={columns} rows={rows} selected={selected} height={height - 3 - (position === null ? 0 : 1)} empty="No key has been revoked." />
      {position === null ? null : <Text wrap="truncate" color={tone('muted')}>{`  ${position}`}</Text>}
      {current === undefined ? null : (
        <Box flexDirection="column" marginTop={1}>
          <Text wrap="truncate">{`  Key "${current.name}" (id ${current.keyId}) of ${current.instance}`}</Text>
          <Text wrap="truncate" color={tone('muted')}>{`  revoked ${current.revokedAt}: ${reasonText(current.reason)}.`}</Text>
        </Box>
      )}
    </Box>
  );
}
