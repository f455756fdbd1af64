/**
 * Instances: every instance with its state, the health of its model server, endpoint, pack end
 * (and time left) and active keys. Below the table, the selected instance in full, its aliases
 * (once any instance has one), whether keys can be made for it (and if not, why not), its last
 * probe, and its live figures with sparklines (the daemon samples them once a second; the console
 * polls them as often).
 *
 *   ID      MODEL        STATE     HEALTH   ENDPOINT     PACK END (UTC)     KEYS
 * › gpu-1   gemma4:26b   ready     reachable     http://10.…  12-01 18:00 3h 12m    2
 *   gpu-2   qwen3.6:27b  stopped   -             http://10.…  -                     0
 *
 *   gpu-1 · gemma4:26b · http://10.0.0.5:11434
 *   Aliases: claude-sonnet-4-5, claude-haiku-4-5
 *   Ready: Enter shows its keys, n generates a new one.
 *   Model server: reachable (probed 11-23 12:00:01 UTC)
 *   requests/s      3.0 ▁▁▂▃▅▇█▇▅
 *   tokens/s        120 ▁▂▃▅▇
 *   open streams      2 ▁▁▂▂
 *   errors/s          0 ▁▁▁
 */
import { Box } from 'ink';
import { Text } from '../components/text.js';
import type { InstanceLiveView } from '../../../src/services/live-stats.js';
import type { InstanceView } from '../../../src/wire/views.js';
import { type Column, Table, flexWidths } from '../components/table.js';
import { packEnd, secondsUtc, whyNotReady } from '../format.js';
import { rate, sparkline } from '../sparkline.js';
import { type Tone, stateTone, useTone } from '../theme.js';

export interface InstancesScreenProps {
  instances: InstanceView[];
  selected: number;
  width: number;
  height: number;
  now: number;
  /** Instances whose default key was never displayed. */
  unrevealed: ReadonlySet<string>;
  /** Live figures by instance id; empty when the daemon serves none. */
  live?: ReadonlyMap<string, InstanceLiveView>;
}

/** The probe's status in the CLI's words (`instances list`). */
const HEALTH: Record<NonNullable<InstanceView['health']>['status'], { text: string; tone: Tone }> = {
  reachable: { text: 'reachable', tone: 'good' },
  unreachable: { text: 'unreachable', tone: 'bad' },
  'model missing': { text: 'model missing', tone: 'bad' },
};

/** Whether any instance has an alias: then every instance's detail says its aliases, none included. */
function anyAliases(instances: InstanceView[]): boolean {
  return instances.some((i) => (i.aliases?.length ?? 0) > 0);
}

/**
 * Lines kept under the table: a margin and the detail (4), the aliases (1) once any instance has
 * one, the probe's status and error (2) once any instance has been probed, the live figures (4)
 * once the daemon has any. Decided for the whole list, not the selected row, so the table does
 * not change height as the selection moves.
 */
function detailLines(instances: InstanceView[], live: ReadonlyMap<string, InstanceLiveView>): number {
  return 4 + (anyAliases(instances) ? 1 : 0) + (instances.some((i) => i.health != null) ? 2 : 0) + (live.size > 0 ? 4 : 0);
}

function perSecond(counts: number[], sampleMs: number[]): number[] {
  return counts.map((n, i) => (n * 1000) / (sampleMs[i] ?? 1000));
}

export function InstancesScreen({ instances, selected, width, height, now, unrevealed, live = new Map() }: InstancesScreenProps) {
  const tone = useTone();
  // The HEALTH column only once something was probed (a daemon with probes off has none).
  const probed = instances.some((i) => i.health != null);
  const [idW, endpointW] = flexWidths(width, probed ? [12, 10, 13, 18, 4] : [12, 10, 18, 4], [2, 3]) as [number, number];
  const columns: Column[] = [
    { title: 'ID', width: idW }, { title: 'MODEL', width: 12 }, { title: 'STATE', width: 10 },
    ...(probed ? [{ title: 'HEALTH', width: 13 }] : []),
    { title: 'ENDPOINT', width: endpointW }, { title: 'PACK END (UTC)', width: 18 }, { title: 'KEYS', width: 4 },
  ];
  const rows = instances.map((i) => {
    const h = i.health == null ? null : HEALTH[i.health.status];
    return [
      { text: i.id, bold: true }, { text: i.model }, { text: i.state, tone: stateTone(i.state) },
      ...(probed ? [h === null ? { text: '-', tone: 'muted' as const } : { text: h.text, tone: h.tone }] : []),
      { text: i.endpoint ?? '-', ...(i.endpoint === null ? { tone: 'muted' as const } : {}) },
      { text: packEnd(i.packEndsAt, now), ...(i.packEndsAt !== null && Date.parse(i.packEndsAt) - now < 3_600_000 ? { tone: 'warn' as const } : {}) },
      { text: String(i.activeKeys).padStart(4) },
    ];
  });
  const current = instances[selected];
  const aliases = !anyAliases(instances) || current === undefined ? null : (current.aliases ?? []);
  const why = current === undefined ? null : whyNotReady(current);
  const figures = current === undefined ? undefined : live.get(current.id);
  const lineW = Math.max(0, Math.min(60, width - 24));
  const figureLines = figures === undefined ? [] : [
    ['requests/s', rate(figures.requestsPerSecond), perSecond(figures.requests, figures.sampleMs)],
    ['tokens/s', rate(figures.tokensPerSecond), perSecond(figures.tokens, figures.sampleMs)],
    ['open streams', String(figures.openStreams), figures.streams],
    ['errors/s', rate(figures.errorsPerSecond), perSecond(figures.errors, figures.sampleMs)],
  ] as const;
  return (
    <Box flexDirection="column">
      <Table columns={columns} rows={rows} selected={selected} height={height - detailLines(instances, live)}
        empty="No instances yet. Add one with `ob-proxy instances add <id> --model <model> --endpoint <url>`." />
      {current === undefined ? null : (
        <Box flexDirection="column" marginTop={1}>
          <Text wrap="truncate">{`  ${current.id} · ${current.model} · ${current.endpoint ?? 'no endpoint yet'}`}</Text>
          {aliases === null ? null : aliases.length === 0
            ? <Text wrap="truncate" color={tone('muted')}>  Aliases: none</Text>
            : <Text wrap="truncate">{`  Aliases: ${aliases.join(', ')}`}</Text>}
          {why === null
            ? <Text wrap="truncate" color={tone('good')}>  Ready: Enter shows its keys, n generates a new one.</Text>
            : <Text wrap="wrap" color={tone('warn')}>{`  No new keys: ${why}`}</Text>}
          {unrevealed.has(current.id)
            ? <Text wrap="truncate" color={tone('warn')}>  Its default key was never shown: Enter, then r reveals it once.</Text>
            : null}
          {current.health == null ? null : (
            <Text wrap="truncate" color={tone(HEALTH[current.health.status].tone)}>
              {`  Model server: ${current.health.status} (probed ${secondsUtc(current.health.checkedAt)} UTC)`}
            </Text>
          )}
          {current.health?.error == null ? null : <Text wrap="truncate-middle">{`  ${current.health.error}`}</Text>}
          {figureLines.map(([label, value, samples]) => (
            <Text key={label} wrap="truncate">
              {`  ${label.padEnd(13)}${value.padStart(6)} `}<Text color={tone('accent')}>{sparkline(samples, Math.min(lineW, samples.length))}</Text>
            </Text>
          ))}
        </Box>
      )}
    </Box>
  );
}
