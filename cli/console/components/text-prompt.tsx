/**
 * One line of text for a change (a pack's end, a key's limits, a rotation's grace), read as the
 * CLI reads the same flag, so what the console accepts the CLI accepts. Enter applies, Esc
 * cancels; the daemon's refusal is shown under the line and the text kept for another try.
 *
 *   Extend the pack of gpu-1 · now ends 11-23 15:12 UTC
 *   A time (2026-12-01T18:00:00Z) or a duration from now (+8h, +30d). Enter applies, Esc cancels.
 *
 *   Pack ends: +30d█
 */
import { Box, useInput } from 'ink';
import { useState } from 'react';
import { Text } from './text.js';
import { useTone } from '../theme.js';

export interface TextPromptProps {
  title: string;
  help: string;
  label: string;
  initial?: string;
  /** Applies the text; rejects with the error to show (a bad value, the daemon's refusal). */
  onSubmit(text: string): Promise<void>;
  onCancel(): void;
}

export function TextPrompt({ title, help, label, initial = '', onSubmit, onCancel }: TextPromptProps) {
  const tone = useTone();
  const [text, setText] = useState(initial);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  useInput((input, key) => {
    if (busy) return;
    if (key.escape) return onCancel();
    if (key.return) {
      setBusy(true);
      setError(null);
      onSubmit(text).catch((err: unknown) => {
        setError(err instanceof Error ? err.message : String(err));
        setBusy(false);
      });
      return;
    }
    if (key.backspace || key.delete) return setText((t) => [...t].slice(0, -1).join(''));
    if (key.ctrl && input === 'u') return setText('');
    if (key.ctrl || key.meta || key.tab || key.upArrow || key.downArrow || key.leftArrow || key.rightArrow) return;
    if (input.length > 0) {
      setError(null);
      setText((t) => t + input);
    }
  });
  return (
    <Box flexDirection="column">
      <Text bold wrap="truncate">{title}</Text>
      <Text color={tone('muted')} wrap="wrap">{help}</Text>
      <Text> </Text>
      <Text wrap="truncate">{label}<Text bold>{text}</Text>{busy ? '' : <Text inverse> </Text>}</Text>
      <Text> </Text>
      {busy ? <Text>Applying…</Text> : null}
      {error === null ? null : <Text color={tone('bad')} wrap="wrap">{error}</Text>}
    </Box>
  );
}
