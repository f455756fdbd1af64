/**
 * A fixed-width table that fits its pane: one line per row, the selected row marked with `›`
 * (visible without colour and in plain-text captures) and shown inverse, scrolled so the
 * selection stays in view.
 *
 *   NAME       HINT         STATUS
 * › ci-bot     ob_sk_…a1B2  active
 *   default    ob_sk_…Zz09  revoked
 */
import { Box } from 'ink';
import { Text } from './text.js';
import { fit } from '../format.js';
import { type Tone, useTone } from '../theme.js';

export interface Column {
  title: string;
  width: number;
}

export interface Cell {
  text: string;
  tone?: Tone;
  bold?: boolean;
}

export interface TableProps {
  columns: Column[];
  rows: Cell[][];
  selected: number;
  /** Lines available, header included. */
  height: number;
  empty: string;
}

/** Splits what is left of `total` after the fixed columns among flexible ones, by weight. */
export function flexWidths(total: number, fixed: number[], weights: number[], min = 6): number[] {
  const gaps = fixed.length + weights.length; // one space after the marker and between columns
  const left = Math.max(0, total - 2 - gaps - fixed.reduce((a, b) => a + b, 0));
  const sum = weights.reduce((a, b) => a + b, 0);
  const out = weights.map((w) => Math.floor((left * w) / sum));
  // What rounding left over goes to the last flexible column.
  out[out.length - 1]! += left - out.reduce((a, b) => a + b, 0);
  return out.map((w) => Math.max(min, w));
}

export function windowStart(selected: number, count: number, visible: number): number {
  if (count <= visible) return 0;
  return Math.min(Math.max(0, selected - Math.floor(visible / 2)), count - visible);
}

export function Table({ columns, rows, selected, height, empty }: TableProps) {
  const tone = useTone();
  if (rows.length === 0) {
    return (
      <Box flexDirection="column">
        <Text bold>{'  ' + columns.map((c) => fit(c.title, c.width)).join(' ').trimEnd()}</Text>
        <Text color={tone('muted')}>{'  ' + empty}</Text>
      </Box>
    );
  }
  const room = Math.max(1, height - 1);
  const overflow = rows.length > room;
  const visible = overflow ? Math.max(1, room - 1) : room;
  const start = windowStart(selected, rows.length, visible);
  const shown = rows.slice(start, start + visible);
  return (
    <Box flexDirection="column">
      <Text bold wrap="truncate">{'  ' + columns.map((c) => fit(c.title, c.width)).join(' ').trimEnd()}</Text>
      {shown.map((row, i) => {
        const index = start + i;
        const isSelected = index === selected;
        return (
          <Text key={index} wrap="truncate" inverse={isSelected}>
            {isSelected ? '› ' : '  '}
            {row.map((cell, c) => (
              <Text key={c} color={cell.tone === undefined ? undefined : tone(cell.tone)} bold={cell.bold === true}>
                {fit(cell.text, columns[c]?.width ?? 0) + (c === row.length - 1 ? '' : ' ')}
              </Text>
            ))}
          </Text>
        );
      })}
      {overflow ? (
        <Text color={tone('muted')}>{`  ${start + 1}-${start + shown.length} of ${rows.length}`}</Text>
      ) : null}
    </Box>
  );
}
