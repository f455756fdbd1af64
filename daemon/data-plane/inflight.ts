import type { KeyRecord } from '../../src/domain/key.js';
import { type ObProxyError, obError } from '../../src/errors.js';

/** What a revocation ends: a relay to a model server (upstream-relay.ts). */
export interface Terminable {
  /** Ends the exchange now: the client gets `err`, the upstream request is aborted. */
  terminate(err: ObProxyError): void;
}

export interface InflightEntry {
  readonly key: KeyRecord;
  /** The newest request in flight; each links to the one before it. */
  head: InflightNode | null;
  size: number;
}

/**
 * A request in flight is its own place in its key's list (intrusive, as the response deadlines
 * are): no object is made per request to hold it, and `delete` clears the fields again.
 */
export interface InflightNode extends Terminable {
  inflightEntry: InflightEntry | null;
  inflightPrev: InflightNode | null;
  inflightNext: InflightNode | null;
}

/**
 * The requests sent upstream and not yet over, per key, so that a revocation or a pack end can
 * end them (docs/contract.md §3). Each key's requests are a doubly linked list, and a request that leaves
 * it has its links cleared. Not a Set: a Set that long-lived code adds to and deletes from
 * thousands of times a second rebuilds its hash table every few dozen requests, and each old
 * table keeps a link to the next one, and its entries, until a full collection. Once one of those
 * tables had been promoted, every later table, and every request it held, was promoted too:
 * 5 to 7 KB per request instead of about 140 B, with a mark-compact every few hundred
 * milliseconds (docs/performance.md, "What each optimisation bought"). A key's empty entry is kept until the next
 * sweep, so a busy key does not make one per request.
 */
export class InflightRequests {
  private readonly byKey = new Map<string, InflightEntry>();

  add(key: KeyRecord, node: InflightNode): void {
    let e = this.byKey.get(key.id);
    if (e === undefined) {
      e = { key, head: null, size: 0 };
      this.byKey.set(key.id, e);
    }
    node.inflightEntry = e;
    node.inflightPrev = null;
    node.inflightNext = e.head;
    if (e.head !== null) e.head.inflightPrev = node;
    e.head = node;
    e.size++;
  }

  /** The request is over: out of its key's list (again, or never added: nothing). */
  delete(node: InflightNode): void {
    const e = node.inflightEntry;
    if (e === null) return;
    const { inflightPrev: prev, inflightNext: next } = node;
    if (prev === null) e.head = next;
    else prev.inflightNext = next;
    if (next !== null) next.inflightPrev = prev;
    node.inflightEntry = null;
    node.inflightPrev = null;
    node.inflightNext = null;
    e.size--;
  }

  /** How many are in flight for the key (for tests and the status view). */
  count(keyId: string): number {
    return this.byKey.get(keyId)?.size ?? 0;
  }

  /** Ends every request in flight for the key with `err`. */
  end(keyId: string, err: ObProxyError): void {
    const e = this.byKey.get(keyId);
    if (e === undefined) return;
    this.byKey.delete(keyId);
    // A relay deletes itself as it finishes: take the next link first.
    for (let n = e.head; n !== null;) {
      const next = n.inflightNext;
      if (n.inflightEntry !== null) n.terminate(err);
      n = next;
    }
  }

  /**
   * Re-checks each key that has requests in flight, and ends those whose check now fails.
   * `verdict` answers null for a key still good.
   */
  sweep(verdict: (key: KeyRecord) => ObProxyError | null): void {
    for (const [id, e] of this.byKey) {
      if (e.size === 0) {
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
    'This API key was revoked (or its deployment stopped or removed) while the request was in flight; it can never be used again. Ask whoever gave you the key for a new one.',
});
const PACK_ENDED = obError('pack_ended');

/** The error that ends a key's in-flight work: pack_ended when its pack ran out, else revoked. */
export function inflightError(packEnded: boolean): ObProxyError {
  return packEnded ? PACK_ENDED : REVOKED;
}
