import type { KeyRecord, RevokeReason } from '../../domain/key.js';
import type { JournalRecord } from '../revocation-journal.js';
import type { StoreData } from '../store.js';
import { revokedKey } from './revocations.js';

/** A revocation this daemon knows, enough to write it again. */
export interface Revocation {
  at: string;
  reason: RevokeReason;
}

/** Revocations only this daemon holds: how many, and the oldest's time (null: none, or none known). */
export interface UnsharedSummary {
  count: number;
  oldestAt: string | null;
}

/**
 * Every revocation this daemon knows, and how far each has reached the database. Invariants:
 * - a key once known revoked stays known: it is written back into a database that lost it;
 * - a key is shared once ob_revocations holds it (every daemon refuses it), and a shared key is
 *   never unshared;
 * - unshared: revocations still to be put into ob_revocations (from the journal, after a restart);
 * - to write back: revocations whose key the database holds active, and that no running
 *   daemon's lifecycle writes (its daemon restarted, or died).
 * The write-back (revocation-write-back.ts) drains the last two.
 */
export class RevocationLedger {
  private readonly known = new Map<string, Revocation>();
  private readonly shared = new Set<string>();
  private readonly unshared = new Map<string, KeyRecord>();
  private readonly writeBack = new Map<string, KeyRecord>();

  constructor(private readonly now: () => number) {}

  remember(key: KeyRecord): void {
    if (this.known.has(key.id)) return;
    this.known.set(key.id, {
      at: key.revokedAt ?? new Date(this.now()).toISOString(),
      reason: key.revokeReason ?? 'manual',
    });
  }

  /** How this daemon knows the key revoked (undefined: it does not). */
  revocation(keyId: string): Revocation | undefined {
    return this.known.get(keyId);
  }

  isShared(keyId: string): boolean {
    return this.shared.has(keyId);
  }

  /** ob_revocations holds the key's revocation. */
  markShared(keyId: string): void {
    this.shared.add(keyId);
    this.unshared.delete(keyId);
  }

  /** The database did not take the key's revocation: it is put into ob_revocations later. */
  markUnshared(key: KeyRecord): void {
    this.unshared.set(key.id, { ...key });
  }

  /** The database holds the key active though it is revoked: it is revoked in it again, with its event. */
  toWriteBack(key: KeyRecord): void {
    this.writeBack.set(key.id, key);
  }

  writtenBack(keyId: string): void {
    this.writeBack.delete(keyId);
  }

  unsharedKeys(): KeyRecord[] {
    return [...this.unshared.values()];
  }

  /**
   * The revocations the database has not taken (this daemon's memory and journal alone): how
   * many, and when the oldest was made.
   */
  unsharedSummary(): UnsharedSummary {
    let oldestAt: string | null = null;
    for (const k of this.unshared.values()) {
      const at = k.revokedAt ?? this.known.get(k.id)?.at ?? null;
      if (at !== null && (oldestAt === null || Date.parse(at) < Date.parse(oldestAt))) oldestAt = at;
    }
    return { count: this.unshared.size, oldestAt };
  }

  writeBackKeys(): KeyRecord[] {
    return [...this.writeBack.values()];
  }

  /** Whether anything waits to be written. */
  hasPending(): boolean {
    return this.unshared.size > 0 || this.writeBack.size > 0;
  }

  /**
   * Revocations read from ob_revocations: each is shared, and those this daemon did not know
   * are returned, as keys the registry takes.
   */
  heard(records: readonly KeyRecord[]): KeyRecord[] {
    const fresh: KeyRecord[] = [];
    for (const r of records) {
      this.markShared(r.id);
      if (this.known.has(r.id)) continue;
      const key = revokedKey(r);
      this.remember(key);
      fresh.push(key);
    }
    return fresh;
  }

  /**
   * Revoked wins over the rows of ob_keys: a key in ob_revocations, or in this daemon's journal
   * of revocations the database did not take, is revoked in `data` (in place). Those the
   * database still holds active are written back by the next periods: a journal's into
   * ob_revocations first, then every one as a change, with its audit event. Usually neither
   * holds any (a load reads only the revocations ob_keys does not show yet), and the keys are
   * not looked at; otherwise only the keys named are indexed, in one pass.
   */
  revokedWins(data: StoreData, rows: readonly KeyRecord[], journal: readonly JournalRecord[]): void {
    for (const r of rows) this.shared.add(r.id);
    if (rows.length === 0 && journal.length === 0) return;
    const named = new Set<string>();
    for (const r of rows) named.add(r.id);
    for (const j of journal) named.add(j.keyId).add(j.keyHash);
    const byId = new Map<string, KeyRecord>();
    const byHash = new Map<string, KeyRecord>();
    for (const k of data.keys) {
      if (named.has(k.id)) byId.set(k.id, k);
      if (named.has(k.hash)) byHash.set(k.hash, k);
    }
    const revoke = (key: KeyRecord, at: string, reason: RevokeReason): boolean => {
      if (key.status !== 'active') return false;
      key.status = 'revoked';
      key.revokedAt = at;
      key.revokeReason = reason;
      this.writeBack.set(key.id, { ...key });
      return true;
    };
    for (const r of rows) {
      const key = byId.get(r.id);
      if (key !== undefined) revoke(key, r.revokedAt ?? new Date(this.now()).toISOString(), r.revokeReason ?? 'manual');
    }
    for (const j of journal) {
      const key = byId.get(j.keyId) ?? byHash.get(j.keyHash);
      if (key === undefined) continue;
      // A key ob_keys shows revoked is in ob_revocations too (a load reads only the rows ob_keys
      // does not show yet), so only a revocation the database lacks is shared again.
      if (revoke(key, j.at, j.reason) && !this.shared.has(key.id)) this.unshared.set(key.id, { ...key });
    }
  }
}
