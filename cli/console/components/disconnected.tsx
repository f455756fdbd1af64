/**
 * Shown instead of the panes while the daemon cannot be reached: what is wrong, what to do,
 * and that the console keeps trying.
 */
import { Box } from 'ink';
import { Text } from './text.js';
import type { Connection } from '../use-daemon.js';
import { useTone } from '../theme.js';

export function Disconnected({ connection, socketPath }: { connection: Connection; socketPath: string }) {
  const tone = useTone();
  if (connection.state === 'connecting') {
    return <Text color={tone('muted')}>Connecting to the ob-proxy daemon at {socketPath}…</Text>;
  }
  if (connection.state !== 'down') return null;
  return (
    <Box flexDirection="column">
      <Text bold color={tone('bad')}>The ob-proxy daemon is not reachable.</Text>
      <Text wrap="wrap">{connection.message}</Text>
      <Text> </Text>
      <Text color={tone('muted')}>Reconnecting on its own (attempt {connection.attempts})… q quits.</Text>
    </Box>
  );
}
