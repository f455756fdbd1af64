/**
 * The top two lines: where the console is connected, then the panes.
 *
 *   ob-proxy console · http://127.0.0.1:8080 · ● live                    ? help
 *   [1 Instances 2]  2 Keys: gpu-1 (1)  3 Revocations (0)
 *
 * With a shared store, the first line also says how the store's daemons stand
 * (`3 daemons: 1 behind (a1b2c3d4)`), as `ob-proxy status` lists them.
 */
import { Box } from 'ink';
import { Text } from './text.js';
import type { Connection } from '../use-daemon.js';
import { useTone } from '../theme.js';

export type Pane = 'instances' | 'keys' | 'revocations';
export const PANES: Pane[] = ['instances', 'keys', 'revocations'];

export function Header({ baseUrl, connection, width, daemons = null }: { baseUrl: string | null; connection: Connection; width: number; daemons?: { text: string; ok: boolean } | null }) {
  const tone = useTone();
  const [dot, label, t] = connection.state === 'live' ? ['●', 'live', 'good' as const]
    : connection.state === 'connecting' ? ['○', 'connecting…', 'warn' as const]
      : ['●', 'daemon unreachable', 'bad' as const];
  const where = baseUrl === null ? '' : ` · ${baseUrl}`;
  const cluster = daemons === null ? '' : ` · ${daemons.text}`;
  const used = 'ob-proxy console'.length + where.length + ' · '.length + dot.length + 1 + label.length + cluster.length + '? help'.length;
  const pad = Math.max(1, width - used);
  return (
    <Text wrap="truncate">
      <Text bold>ob-proxy console</Text>
      {where}
      {' · '}
      <Text color={tone(t)}>{dot}</Text> {label}
      {daemons === null ? '' : <>{' · '}<Text color={tone(daemons.ok ? 'muted' : 'bad')}>{daemons.text}</Text></>}
      {' '.repeat(pad)}
      <Text color={tone('muted')}>? help</Text>
    </Text>
  );
}

export function Tabs({ pane, labels }: { pane: Pane; labels: Record<Pane, string> }) {
  const tone = useTone();
  return (
    <Box>
      {PANES.map((p, i) => {
        const text = `${i + 1} ${labels[p]}`;
        return p === pane
          ? <Text key={p} bold inverse color={tone('accent')}>{`[${text}]`}</Text>
          : <Text key={p}>{` ${text} `}</Text>;
      })}
    </Box>
  );
}
