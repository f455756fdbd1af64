/**
 * `?`: every key binding, from the one keymap (cli/console/keymap.ts).
 */
import { Box, useInput } from 'ink';
import { Text } from './text.js';
import { KEYMAP } from '../keymap.js';
import { fit } from '../format.js';
import { useTone } from '../theme.js';

export function HelpOverlay({ onClose, height }: { onClose(): void; height: number }) {
  const tone = useTone();
  useInput((input, key) => {
    if (key.escape || key.return || input === 'q' || input === '?') onClose();
  });
  const lines: { text: string; heading: boolean }[] = [];
  for (const group of KEYMAP) {
    lines.push({ text: group.where, heading: true });
    for (const b of group.bindings) lines.push({ text: `  ${fit(b.keys, 10)} ${b.action}`, heading: false });
  }
  // Two columns when one does not fit the pane.
  const perColumn = Math.max(1, height - 1);
  const half = Math.ceil(lines.length / 2);
  const columns = lines.length > perColumn ? [lines.slice(0, half), lines.slice(half)] : [lines];
  return (
    <Box flexDirection="column">
      <Text bold>Keys <Text color={tone('muted')}>(Esc, q or ? closes)</Text></Text>
      <Box>
        {columns.map((col, c) => (
          <Box key={c} flexDirection="column" width={39} marginRight={1}>
            {col.map((l, i) => <Text key={i} wrap="truncate" bold={l.heading} color={l.heading ? tone('accent') : undefined}>{l.text}</Text>)}
          </Box>
        ))}
      </Box>
    </Box>
  );
}
