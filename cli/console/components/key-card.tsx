/**
 * One key as `ob-proxy keys show` prints it: the same rows and words (cli/key-card.ts), read
 * from the daemon when opened. Never its secret: the daemon does not keep it.
 */
import { Box, useInput } from 'ink';
import type { KeyView } from '../../../src/wire/views.js';
import { keyCardRows } from '../../key-card.js';
import { fit } from '../format.js';
import { Text } from './text.js';
import { useTone } from '../theme.js';

export function KeyCard({ view, onClose }: { view: KeyView; onClose(): void }) {
  const tone = useTone();
  useInput((input, key) => {
    if (key.escape || key.return || input === 'q') onClose();
  });
  return (
    <Box flexDirection="column">
      <Text bold wrap="truncate">Key "{view.name}" of {view.instance} <Text color={tone('muted')}>(as `ob-proxy keys show {view.id}`)</Text></Text>
      <Text> </Text>
      {keyCardRows(view).map(([label, value]) => (
        <Text key={label} wrap="truncate">{`  ${fit(label, 12)} `}{value}</Text>
      ))}
    </Box>
  );
}
