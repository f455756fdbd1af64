import type { KeyRecord } from '../../src/domain/key.js';
import { type ObProxyError, obError } from '../../src/errors.js';
import type { DaemonContext } from '../context.js';
import { endDuePacksSoon } from './auth-hook.js';

/** What a revocation ends: a relay to a model server (upstream-relay.ts). */
export interface Terminable {
  /** Ends the exchange now: the client gets `err`, the upstream request is aborted. */
  terminate(err: ObProxyError): void;
}

interface Entry {
  readonly key: KeyRecord;
  readonly live: Set<Terminable>;
}

/**
 * The requests sent upstream and not yet over, per key, so that a revocation or a pack end can
 * end them (CONTRACT §3). The request path adds and deletes (two map look-ups, no allocation for
 * a key already here); a key's empty set is kept until the next sweep, so a busy key does not
 * make a set per request.
 */
export class InflightRequests {
  private readonly byKey = new Map<string, Entry>();

  add(key: KeyRecord, relay: Terminable): void {
    let e = this.byKey.get(key.id);
    if (e === undefined) {
      e = { key, live: new Set() };
      this.byKey.set(key.id, e);
    }
    e.live.add(relay);
  }

  delete(key: KeyRecord, relay: Terminable): void {
    this.byKey.get(key.id)?.live.delete(relay);
  }

  /** How many are in flight for the key (for tests and the status view). */
  count(keyId: string): number {
    return this.byKey.get(keyId)?.live.size ?? 0;
  }

  /** Ends every request in flight for the key with `err`. */
  end(keyId: string, err: ObProxyError): void {
    const e = this.byKey.get(keyId);
    if (e === undefined) return;
    this.byKey.delete(keyId);
    // A relay deletes itself as it finishes; a Set tolerates that while it is iterated.
    for (const relay of e.live) relay.terminate(err);
  }

  /**
   * Re-checks each key that has requests in flight, and ends those whose check now fails.
   * `verdict` answers null for a key still good.
   */
  sweep(verdict: (key: KeyRecord) => ObProxyError | null): void {
    for (const [id, e] of this.byKey) {
      if (e.live.size === 0) {
        this.byKey.delete(id);
        continue;
      }
      const err = verdict(e.key);
      if (err !== null) this.end(id, err);
    }
  }
}

const REVOKED = obError('revoked_api_key', {
  message:
    'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Generate a new key for a ready instance.',
});
const PACK_ENDED = obError('pack_ended');

/** The error that ends a key's in-flight work: pack_ended when its pack ran out, else revoked. */
export function inflightError(packEnded: boolean): ObProxyError {
  return packEnded ? PACK_ENDED : REVOKED;
}

/** How often the sweep re-checks keys with work in flight: well within the second promised. */
export const SWEEP_MS = 250;

/**
 * Ends in-flight work when its key is revoked (CONTRACT §3): at once on each `key.revoked`
 * event, which the lifecycle emits before the CLI's call returns; and, as a backstop, a sweep
 * that re-checks every key with work in flight against the registry. The sweep catches a pack
 * whose time has come before the pack timer fires (a late or busy event loop), and any change to
 * a key or its deployment that reaches the registry without an event. Returns stop.
 */
export function watchRevocations(ctx: DaemonContext): () => void {
  const unsubscribe = ctx.lifecycle.onChange((e) => {
    if (e.type === 'key.revoked' && e.keyId !== undefined)
      ctx.inflight.end(e.keyId, inflightError(e.reason === 'pack_ended'));
  });
  const registry = ctx.lifecycle.registry;
  const timer = setInterval(() => {
    const now = ctx.clock.now();
    let packDue = false;
    ctx.inflight.sweep((key) => {
      // requireReady false: a deployment moved back to pending keeps its keys, and its streams.
      const r = registry.check(key, now, false);
      if (r.ok) return null;
      if (r.packEnded === true) packDue = true;
      return inflightError(r.packEnded === true || key.revokeReason === 'pack_ended');
    });
    if (packDue) endDuePacksSoon(ctx);
  }, SWEEP_MS);
  timer.unref();
  return () => {
    unsubscribe();
    clearInterval(timer);
  };
}
