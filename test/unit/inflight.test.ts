import { describe, expect, it } from 'vitest';
import type { KeyRecord } from '../../src/domain/key.js';
import { keyRecord } from '../helpers/key-record.js';
import { type ObProxyError, obError } from '../../src/errors.js';
import { type InflightEntry, type InflightNode, InflightRequests } from '../../daemon/data-plane/inflight.js';

const key = (id: string): KeyRecord => keyRecord(id);

/** A relay that, as the real ones do, leaves the in-flight list when it is terminated. */
class FakeRelay implements InflightNode {
  ended: ObProxyError | null = null;
  inflightEntry: InflightEntry | null = null;
  inflightPrev: InflightNode | null = null;
  inflightNext: InflightNode | null = null;
  constructor(private readonly inflight: InflightRequests) {}
  terminate(err: ObProxyError): void {
    this.ended = err;
    this.inflight.delete(this);
  }
}

const REVOKED = obError('revoked_api_key');

describe('InflightRequests', () => {
  it('ends exactly the requests of the revoked key still in flight, however they came and went', () => {
    const inflight = new InflightRequests();
    const a = key('a');
    const b = key('b');
    const relays: FakeRelay[] = [];
    for (let i = 0; i < 6; i++) {
      const r = new FakeRelay(inflight);
      inflight.add(i % 2 === 0 ? a : b, r);
      relays.push(r);
    }
    // First, middle and last of key a's list finish on their own; a second delete changes nothing.
    inflight.delete(relays[0]!);
    inflight.delete(relays[0]!);
    inflight.delete(relays[4]!);
    expect(inflight.count('a')).toBe(1);
    expect(inflight.count('b')).toBe(3);

    inflight.end('a', REVOKED);
    expect(relays.map((r) => r.ended)).toEqual([null, null, REVOKED, null, null, null]);
    expect(inflight.count('a')).toBe(0);

    // Every request of b ends, each deleting itself while the list is walked.
    inflight.end('b', REVOKED);
    expect(relays.filter((r) => r.ended !== null)).toHaveLength(4);
    expect(inflight.count('b')).toBe(0);
  });

  it('sweeps: ends the keys the verdict refuses, drops empty ones, keeps the rest', () => {
    const inflight = new InflightRequests();
    const a = key('a');
    const b = key('b');
    const ra = new FakeRelay(inflight);
    inflight.add(a, ra);
    const rb = new FakeRelay(inflight);
    inflight.add(b, rb);
    const done = new FakeRelay(inflight);
    inflight.add(key('c'), done);
    inflight.delete(done);

    const seen: string[] = [];
    inflight.sweep((k) => {
      seen.push(k.id);
      return k.id === 'a' ? REVOKED : null;
    });
    // c had nothing in flight: not asked about, and gone.
    expect(seen).toEqual(['a', 'b']);
    expect(ra.ended).toBe(REVOKED);
    expect(rb.ended).toBeNull();
    expect(inflight.count('b')).toBe(1);
  });

  it('keeps no link from a finished request to another', () => {
    const inflight = new InflightRequests();
    const a = key('a');
    const relays = [0, 1, 2].map(() => new FakeRelay(inflight));
    for (const r of relays) inflight.add(a, r);
    inflight.delete(relays[1]!);
    // A request that left holds nothing: an old one must not keep young ones alive.
    expect(relays[1]).toMatchObject({ inflightEntry: null, inflightPrev: null, inflightNext: null });
    expect(relays[2]!.inflightNext).toBe(relays[0]);
    expect(relays[0]!.inflightPrev).toBe(relays[2]);
    expect(inflight.count('a')).toBe(2);
    // Deleting one never added changes nothing.
    inflight.delete(new FakeRelay(inflight));
    expect(inflight.count('a')).toBe(2);
  });
});
