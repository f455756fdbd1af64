import type { ExchangeDeps } from '../context.js';
import { inflightError } from './inflight.js';
import { type KeyStandingDeps, endDuePacksSoon, inflightRefusal } from './key-standing.js';

/** How often the sweep re-checks keys with work in flight: well within the second promised. */
export const SWEEP_MS = 250;

/** What the watch reads: the keys' standing and the work in flight. */
export type RevocationWatchDeps = KeyStandingDeps & Pick<ExchangeDeps, 'inflight'>;

/**
 * Ends in-flight work when its key is revoked (docs/contract.md §3): at once on each `key.revoked`
 * event, which the lifecycle emits before the CLI's call returns; and, as a backstop, a sweep
 * that re-checks every key with work in flight against the registry. The sweep catches a pack
 * whose time has come before the pack timer fires (a late or busy event loop), and any change to
 * a key or its deployment that reaches the registry without an event, and a daemon gone out of
 * sync with its shared store for longer than --max-stale (every key's work ends). Returns stop.
 */
export function watchRevocations(ctx: RevocationWatchDeps): () => void {
  const unsubscribe = ctx.lifecycle.onChange((e) => {
    if (e.type === 'key.revoked' && e.keyId !== undefined)
      ctx.inflight.end(e.keyId, inflightError(e.reason === 'pack_ended'));
  });
  const due = { pack: false };
  const timer = setInterval(() => {
    const now = ctx.clock.now();
    due.pack = false;
    ctx.inflight.sweep((key) => inflightRefusal(ctx, key, now, due));
    if (due.pack) endDuePacksSoon(ctx);
  }, SWEEP_MS);
  timer.unref();
  return () => {
    unsubscribe();
    clearInterval(timer);
  };
}
