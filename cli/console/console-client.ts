import type { DaemonClient } from '../daemon-client.js';

/**
 * What the console needs of the management API: exactly these DaemonClient methods, so the
 * console can do nothing the CLI cannot (one API, one client). Component tests pass a fake.
 */
export type ConsoleClient = Pick<
  DaemonClient,
  | 'socketPath'
  | 'status'
  | 'listInstances'
  | 'listKeys'
  | 'createKey'
  | 'revokeKey'
  | 'revealKey'
  | 'move'
  | 'extend'
  | 'getKey'
  | 'setKeyLimits'
  | 'rotateKey'
  | 'revocations'
  | 'follow'
  | 'stats'
>;
