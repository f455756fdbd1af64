/**
 * A change that cannot be undone (stop, fail, rotate), asked first with the CLI's own question
 * (cli/questions.ts), so the console and the CLI ask the same thing.
 *
 *   Stop instance gpu-1 (gemma4:26b) and revoke its 2 active keys for ever?
 *   Every request with them is refused (401) at once. This cannot be undone.
 *     y stop   n / Esc keep it
 */
import { Box, useInput } from 'ink';
import { Text } from './text.js';
import { useTone } from '../theme.js';

export interface ConfirmActionProps {
  question: string;
  detail: string;
  /** What y does, in one word: `stop`, `fail`, `rotate`. */
  yes: string;
  busy: boolean;
  busyText: string;
  onYes(): void;
  onNo(): void;
}

export function ConfirmAction({ question, detail, yes, busy, busyText, onYes, onNo }: ConfirmActionProps) {
  const tone = useTone();
  useInput((input, key) => {
    if (busy) return;
    if (input === 'y' || input === 'Y') onYes();
    else if (input === 'n' || input === 'N' || input === 'q' || key.escape) onNo();
  });
  return (
    <Box flexDirection="column" borderStyle="single" borderColor={tone('bad')} paddingX={1}>
      <Text bold wrap="wrap">{question}</Text>
      <Text wrap="wrap">{detail}</Text>
      <Text> </Text>
      {busy ? <Text>{busyText}</Text> : <Text><Text bold color={tone('bad')}>y</Text> {yes}   <Text bold>n / Esc</Text> keep it</Text>}
    </Box>
  );
}
