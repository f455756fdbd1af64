/**
 * Revoking is for ever, so it is asked first, naming the key.
 *
 *   Revoke key "ci-bot" (ob_sk_…a1B2) of gpu-1?
 *   Every request with it is refused (401) at once, for ever. This cannot be undone.
 *     y revoke   n / Esc keep it
 */
import { Box, useInput } from 'ink';
import { Text } from './text.js';
import type { KeyView } from '../../../src/wire/views.js';
import { KEY_NAME_MAX } from '../../../src/domain/validate.js';
import { cut } from '../format.js';
import { useTone } from '../theme.js';

export interface ConfirmRevokeProps {
  target: KeyView;
  busy: boolean;
  onYes(): void;
  onNo(): void;
}

/**
 * A name wider than any valid one (64 characters, two cells each at most) or a hint wider than
 * ob_sk_…AAAA, which only a hand-edited or older store holds, is cut: the question keeps its
 * instance and its answers on screen instead of overflowing the box.
 */
const NAME_CELLS = 2 * KEY_NAME_MAX;
const HINT_CELLS = 16;

export function ConfirmRevoke({ target, busy, onYes, onNo }: ConfirmRevokeProps) {
  const tone = useTone();
  useInput((input, key) => {
    if (busy) return;
    if (input === 'y' || input === 'Y') onYes();
    else if (input === 'n' || input === 'N' || input === 'q' || key.escape) onNo();
  });
  return (
    <Box flexDirection="column" borderStyle="single" borderColor={tone('bad')} paddingX={1}>
      <Text bold>Revoke key "{cut(target.name, NAME_CELLS)}" ({cut(target.hint, HINT_CELLS)}) of {target.instance}?</Text>
      <Text wrap="wrap">Every request with it is refused (401) at once, for ever. This cannot be undone.</Text>
      <Text> </Text>
      {busy ? <Text>Revoking…</Text> : <Text><Text bold color={tone('bad')}>y</Text> revoke   <Text bold>n / Esc</Text> keep it</Text>}
    </Box>
  );
}
