import type { AuditEvent, KeyRecord, RevokeReason } from '../domain/key.js';
import type { JournalRecord } from './revocation-journal.js';
import type { StoreData } from './store.js';

export interface Reconciled {
  data: StoreData;
  /** Keys found active although something recorded their revocation, for the log. */
  notices: string[];
  /** Revoked keys the journal does not hold yet (stores from before it, or a lost append). */
  unjournaled: JournalRecord[];
  /** The keys `data` holds a new record of: those found revoked. */
  changed: KeyRecord[];
}

interface Revocation {
  at: string;
  reason: RevokeReason;
  source: string;
}

/**
 * A key's status never disagrees with any record of its revocation: the audit trail in db.json,
 * the revocation journal beside it, or the key's own revokedAt/revokeReason. Whichever says
 * "revoked" wins, so a hand edit back to `active` or an older db.json restored from a backup
 * cannot bring a key back. The journal is matched by key id and by hash, so editing the id does
 * not help either. `archivedThrough`: the time of the newest event moved to the audit archive.
 * `input` is left as it is: a key found revoked is a new record in the answer, which shares the
 * others with it (a copy of every record took seconds of a start at 500,000 keys).
 */
export function revokedWins(
  input: StoreData,
  journal: readonly JournalRecord[],
  archivedThrough: string | null = null,
): Reconciled {
  const data: StoreData = { ...input, keys: [...input.keys], events: [...input.events] };
  const notices: string[] = [];
  const changed: KeyRecord[] = [];
  const byId = new Map<string, JournalRecord>();
  const byHash = new Map<string, JournalRecord>();
  for (const r of journal) {
    if (!byId.has(r.keyId)) byId.set(r.keyId, r);
    if (!byHash.has(r.keyHash)) byHash.set(r.keyHash, r);
  }
  const audited = new Map<string, AuditEvent>();
  for (const e of data.events)
    if (e.type === 'key.revoked' && e.keyId !== undefined && !audited.has(e.keyId)) audited.set(e.keyId, e);
  let seq = data.events.reduce((m, e) => Math.max(m, e.seq), 0);

  for (let i = 0; i < data.keys.length; i++) {
    const key = data.keys[i]!;
    if (key.status === 'revoked') continue;
    const found = revocationOf(key, byId.get(key.id) ?? byHash.get(key.hash), audited.get(key.id));
    if (found === null) continue;
    data.keys[i] = { ...key, status: 'revoked', revokedAt: found.at, revokeReason: found.reason };
    changed.push(data.keys[i]!);
    notices.push(
      `Key ${key.id} (instance ${key.instance}) was active in the store, but ${found.source} records its revocation (${found.reason}, ${found.at}): it stays revoked.`,
    );
    if (!audited.has(key.id)) {
      data.events.push({
        seq: ++seq,
        at: found.at,
        type: 'key.revoked',
        instance: key.instance,
        keyId: key.id,
        keyName: key.name,
        reason: found.reason,
      });
      audited.set(key.id, data.events[data.events.length - 1]!);
    }
  }

  const unjournaled: JournalRecord[] = [];
  const archivedMs = archivedThrough === null ? null : Date.parse(archivedThrough);
  for (const key of data.keys) {
    if (key.status !== 'revoked') continue;
    if (!byId.has(key.id)) unjournaled.push(journalRecordOf(key));
    // The other direction: `ob-proxy revocations` reads the audit trail, so a revoked key whose
    // event was deleted would vanish from it.
    // A revocation older than the newest archived event has its event in the archive.
    if (!audited.has(key.id) && !(archivedMs !== null && Date.parse(key.revokedAt ?? key.createdAt) <= archivedMs)) {
      const at = key.revokedAt ?? key.createdAt;
      data.events.push({
        seq: ++seq,
        at,
        type: 'key.revoked',
        instance: key.instance,
        keyId: key.id,
        keyName: key.name,
        reason: key.revokeReason ?? 'manual',
      });
      audited.set(key.id, data.events[data.events.length - 1]!);
      notices.push(
        `Key ${key.id} (instance ${key.instance}) is revoked but its key.revoked event was missing from the audit trail: added again.`,
      );
    }
  }
  return { data, notices, unjournaled, changed };
}

function revocationOf(
  key: KeyRecord,
  journaled: JournalRecord | undefined,
  event: AuditEvent | undefined,
): Revocation | null {
  if (journaled !== undefined) return { at: journaled.at, reason: journaled.reason, source: 'the revocation journal' };
  if (event !== undefined)
    return { at: event.at, reason: event.reason ?? 'manual', source: `the audit trail (event ${event.seq})` };
  if (key.revokedAt !== null || key.revokeReason !== null) {
    return {
      at: key.revokedAt ?? key.createdAt,
      reason: key.revokeReason ?? 'manual',
      source: 'its own revokedAt/revokeReason',
    };
  }
  return null;
}

/** The journal's line for a revoked key: ids, binding and reason; the hash, never a secret. */
export function journalRecordOf(key: KeyRecord): JournalRecord {
  return {
    keyId: key.id,
    keyHash: key.hash,
    instance: key.instance,
    deployment: typeof key.deployment === 'string' ? key.deployment : null,
    reason: key.revokeReason ?? 'manual',
    at: new Date(key.revokedAt ?? key.createdAt).toISOString(),
  };
}
