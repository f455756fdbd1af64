/**
 * Instances: every instance with its state, endpoint, pack end (and time left) and active keys.
 * Below the table, the selected instance in full, and whether keys can be made for it (and if
 * not, why not).
 *
 *   ID        MODEL        STATE      ENDPOINT          PACK END           KEYS
 * › gpu-1     gemma4:26b   ready      http://10.0.0.5…  12-01 18:00 3h 12m    2
 *   gpu-2     qwen3.6:27b  stopped    http://10.0.0.6…  none                  0
 *
 *   gpu-1 · gemma4:26b · http://10.0.0.5:11434
 *   Ready: Enter shows its keys, n generates a new one.
 */
import { Box } from 'ink';
import { Text } from '../components/text.js';
import type { InstanceView } from '../../../src/wire/views.js';
import { type Column, Table, flexWidths } from '../components/table.js';
import { packEnd, whyNotReady } from '../format.js';
import { stateTone, useTone } from '../theme.js';

export interface InstancesScreenProps {
  instances: InstanceView[];
  selected: number;
  width: number;
  height: number;
  now: number;
  /** Instances whose default key was never displayed. */
  unrevealed: ReadonlySet<string>;
}

export function InstancesScreen({ instances, selected, width, height, now, unrevealed }: InstancesScreenProps) {
  const tone = useTone();
  const [idW, endpointW] = flexWidths(width, [12, 10, 18, 4], [2, 3]) as [number, number];
  const columns: Column[] = [
    { title: 'ID', width: idW }, { title: 'MODEL', width: 12 }, { title: 'STATE', width: 10 },
    { title: 'ENDPOINT', width: endpointW }, { title: 'PACK END (UTC)', width: 18 }, { title: 'KEYS', width: 4 },
  ];
  const rows = instances.map((i) => [
    { text: i.id, bold: true }, { text: i.model }, { text: i.state, tone: stateTone(i.state) },
    { text: i.endpoint ?? 'no endpoint', ...(i.endpoint === null ? { tone: 'muted' as const } : {}) },
    { text: packEnd(i.packEndsAt, now), ...(i.packEndsAt !== null && Date.parse(i.packEndsAt) - now < 3_600_000 ? { tone: 'warn' as const } : {}) },
    { text: String(i.activeKeys).padStart(4) },
  ]);
  const current = instances[selected];
  const why = current === undefined ? null : whyNotReady(current);
  return (
    <Box flexDirection="column">
      <Table columns={columns} rows={rows} selected={selected} height={height - 4}
        empty="No instances yet. Add one with `ob-proxy instances add <id> --model <model> --endpoint <url>`." />
      {current === undefined ? null : (
        <Box flexDirection="column" marginTop={1}>
          <Text wrap="truncate">{`  ${current.id} · ${current.model} · ${current.endpoint ?? 'no endpoint yet'}`}</Text>
          {why === null
            ? <Text wrap="truncate" color={tone('good')}>  Ready: Enter shows its keys, n generates a new one.</Text>
            : <Text wrap="wrap" color={tone('warn')}>{`  No new keys: ${why}`}</Text>}
          {unrevealed.has(current.id)
            ? <Text wrap="truncate" color={tone('warn')}>  Its default key was never shown: Enter, then r reveals it once.</Text>
            : null}
        </Box>
      )}
    </Box>
  );
}
