/**
 * The bottom two lines: the latest notice (what just happened), then the keys that work here.
 *
 *   04:01:22 gpu-1 is now stopped: its keys were revoked.
 *   ↑↓ move  Enter keys  n new key  Tab pane  ? help  q quit
 */
import { Text } from './text.js';
import { type Tone, useTone } from '../theme.js';

export interface Notice {
  at: string;
  text: string;
  tone: Tone;
}

export function StatusLine({ notice, hints }: { notice: Notice | null; hints: string }) {
  const tone = useTone();
  return (
    <>
      <Text wrap="truncate" color={notice === null ? undefined : tone(notice.tone)}>
        {notice === null ? ' ' : `${notice.at.slice(11, 19)} ${notice.text}`}
      </Text>
      <Text wrap="truncate" color={tone('muted')}>{hints}</Text>
    </>
  );
}
