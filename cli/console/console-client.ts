import type { DaemonClient } from '../daemon-client.js';

/**
 * What the console needs of the management API: exactly these DaemonClient methods, so the
 * console can do nothing the CLI cannot (one API, one client). Component tests pass a fake.
 * Keys and revocations only by the page: a console open on a store of any size asks for the
 * rows it shows, never for a whole list.
 */
export type ConsoleClient = Pick<
  DaemonClient,
  | 'socketPath'
  | 'status'
  | 'listInstances'
  | 'keyPage'
  | 'createKey'
  | 'revokeKey'
  | 'revealKey'
  | 'move'
  | 'extend'
  | 'getKey'
  | 'setKeyLimits'
  | 'rotateKey'
  | 'revocationPage'
  | 'follow'
  | 'stats'
>;
