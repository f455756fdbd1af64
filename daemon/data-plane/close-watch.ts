import type { ServerResponse } from 'node:http';

/** Told once the client's response closes (the client left, or the answer was written whole). */
export interface CloseWatcher {
  clientClosed(): void;
}

/**
 * A key's place in its concurrency count, held from authentication on (key-limits.ts): given
 * back when the response closes, or by the relay when its exchange is over, whichever is first.
 */
export interface HeldSlot extends CloseWatcher {
  release(): void;
}

const WATCHER = Symbol('close watcher');
type WatchedResponse = ServerResponse & { [WATCHER]?: CloseWatcher | null };

/**
 * The one 'close' listener every watched response shares. A closure per response, or a second
 * listener for the key's slot beside the relay's, cost each limited request a closure, a listener
 * array and its copy at every emit (docs/performance.md, "What each optimisation bought").
 */
function onResponseClose(this: WatchedResponse): void {
  this[WATCHER]?.clientClosed();
}

/**
 * `watcher` is told when `res` closes. A response has one watcher at a time: its exchange
 * (accounting.ts) takes over from the key's slot, and gets the slot back (to release when the
 * exchange is over).
 */
export function watchClose(res: ServerResponse, watcher: CloseWatcher): HeldSlot | null {
  const r = res as WatchedResponse;
  const before = r[WATCHER];
  r[WATCHER] = watcher;
  // undefined: never watched; null: unwatched (its listener gone).
  if (before == null) {
    res.on('close', onResponseClose);
    return null;
  }
  // Only a slot is ever set before an exchange (a response gets one exchange at most).
  return before as HeldSlot;
}

/** Nothing more to tell of `res`: its listener goes, and a close that comes later tells no one. */
export function unwatchClose(res: ServerResponse): void {
  res.off('close', onResponseClose);
  (res as WatchedResponse)[WATCHER] = null;
}
