/**
 * The management plane's view of instance gpu-1 as a daemon built in process shows it
 * (test/helpers/inproc.ts: the clock stays at T0): model MODEL, ready with one active key,
 * fields changed with `over`; and the health a probe that reached the model server records.
 */
import { MODEL, T0 } from './inproc.js';

const AT = new Date(T0).toISOString();

export const REACHABLE = { status: 'reachable', checkedAt: AT, error: null };

export function instanceView(endpoint: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 'gpu-1',
    model: MODEL,
    aliases: [],
    endpoint,
    state: 'ready',
    packEndsAt: null,
    upstreamTokenFile: null,
    activeKeys: 1,
    createdAt: AT,
    updatedAt: AT,
    health: null,
    ...over,
  };
}
