/**
 * The one place a secret is ever drawn. It stays until Enter confirms it was saved; then the
 * console drops it (state and screen). `c` sends it to the clipboard with OSC 52.
 *
 *   ╭──────────────────────────────────────────────────────────────╮
 *   │ New key "ci-bot" for gpu-1 · shown once                      │
 *   │                                                              │
 *   │ ob_sk_3fA9kQ2mXz1B_…                                         │
 *   │                                                              │
 *   │ Base URL  http://127.0.0.1:8080/v1                           │
 *   │ SDK       new OpenAI({ baseURL: '…/v1', apiKey })            │
 *   │ Stored only as a hash: save it now, it is never shown again. │
 *   ╰──────────────────────────────────────────────────────────────╯
 *    c copy to clipboard   Enter I have saved it
 */
import { Box, useInput } from 'ink';
import { Text } from './text.js';
import { useState } from 'react';
import { useTone } from '../theme.js';

export interface ShownSecret {
  title: string;
  secret: string;
  keyId: string;
  keyName: string;
  instance: string;
}

export interface SecretBoxProps {
  shown: ShownSecret;
  baseUrl: string | null;
  width: number;
  onCopy(secret: string): void;
  onSaved(): void;
}

export function SecretBox({ shown, baseUrl, width, onCopy, onSaved }: SecretBoxProps) {
  const tone = useTone();
  const [note, setNote] = useState<string | null>(null);
  useInput((input, key) => {
    if (key.return) return onSaved();
    if (input === 'c') {
      onCopy(shown.secret);
      setNote('Sent to the clipboard (OSC 52). If nothing was copied (no OSC 52 support, or tmux without `set-clipboard on`), select the secret and copy it by hand.');
      return;
    }
    setNote('The secret is shown only until you press Enter: save it first (c copies it).');
  });
  const sdkBase = baseUrl === null ? '<base_url>/v1' : `${baseUrl}/v1`;
  return (
    <Box flexDirection="column" width={Math.min(width, 100)}>
      <Box flexDirection="column" borderStyle="round" borderColor={tone('secret')} paddingX={1}>
        <Text bold wrap="truncate">{shown.title} · shown once</Text>
        <Text> </Text>
        <Text bold color={tone('secret')}>{shown.secret}</Text>
        <Text> </Text>
        <Text wrap="truncate">Base URL  {sdkBase}</Text>
        <Text wrap="truncate">SDK       new OpenAI({'{'} baseURL: '{sdkBase}', apiKey {'}'})</Text>
        <Text wrap="wrap">Stored only as a hash: save it now, it is never shown again.</Text>
      </Box>
      <Text> <Text bold>c</Text> copy to clipboard   <Text bold>Enter</Text> I have saved it</Text>
      {note === null ? null : <Text wrap="wrap" color={tone('muted')}>{note}</Text>}
    </Box>
  );
}
