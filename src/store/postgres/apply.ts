import type { PoolClient } from 'pg';
import type { Instance, InstanceState } from '../../domain/instance.js';
import type { AuditEvent, KeyRecord, RevokeReason } from '../../domain/key.js';
import { obError } from '../../errors.js';
import type { Mutation, UsageDelta } from '../store.js';
import { assertAllowed, setModels } from './settings.js';
import { addUsageRows, insertRouteRows } from './usage.js';
import { addBucketRows } from './usage-buckets.js';

/** What a committed transaction did, for the change log. */
export interface Applied {
  /** The caller's mutations as applied (a halt decided on a stale view may lose its putInstance). */
  mutations: Mutation[];
  /** What the store did on the caller's behalf, which the caller must hear too. */
  extra: Mutation[];
}

const HALTED: readonly InstanceState[] = ['stopped', 'failed', 'terminated'];
// The states each halt may start from (src/domain/instance.ts ALLOWED_FROM).
const HALT_FROM: Record<string, readonly InstanceState[]> = {
  stopped: ['pending', 'ready'],
  failed: ['pending', 'ready', 'stopped'],
  terminated: ['pending', 'ready', 'stopped', 'failed'],
};
const HALT_REASON: Record<string, RevokeReason> = {
  stopped: 'instance_stopped',
  failed: 'instance_failed',
  terminated: 'instance_terminated',
};

interface InstanceRow {
  deployment: string;
  state: InstanceState;
  updated_at: string;
  record: Instance;
}

/**
 * Applies one batch inside a transaction the caller opened, after it took the change counter
 * (so no other write runs meanwhile, on any daemon). The rules that keep daemons with slightly
 * stale views from undoing each other:
 * - a key is created only if its instance is, in the database, ready and the same deployment:
 *   otherwise it was stopped or removed through another daemon, and the key is never usable;
 * - halting an instance revokes, here, every active key of its deployment, including keys created
 *   through other daemons that this one had not heard of yet (revoked with the rest);
 * - any other instance change must have been decided from the row as it is (its updatedAt), else
 *   it is refused; a halt decided on a stale view still revokes, and keeps the row's own fields;
 * - revoked wins: a key is never made active again; usage is only ever added to.
 */
export async function applyBatch(client: PoolClient, batch: readonly Mutation[], now: string): Promise<Applied> {
  const applied: Mutation[] = [];
  const extra: Mutation[] = [];
  const events: AuditEvent[] = [];
  const usage: UsageDelta[] = [];
  const eventFor = (partial: Omit<AuditEvent, 'seq' | 'at'>): AuditEvent => {
    const e: AuditEvent = { seq: 0, at: now, ...partial };
    events.push(e);
    extra.push({ op: 'appendEvent', event: e });
    return e;
  };
  // Keys the batch revokes that the database held revoked already (through another daemon, or
  // written back from ob_revocations): their key.revoked events are in the trail, not added twice.
  const revokedBefore = new Set<string>();
  // Keys revoked by this batch itself: not revoked again as extras.
  const revokedHere = new Set(
    batch.flatMap((m) => (m.op === 'putKey' && m.key.status === 'revoked' ? [m.key.id] : [])),
  );

  const revokeRest = async (instance: string, deployment: string, reason: RevokeReason): Promise<void> => {
    const { rows } = await client.query<{ record: KeyRecord }>(
      `UPDATE ob_keys SET status = 'revoked',
         record = record || jsonb_build_object('status', 'revoked', 'revokedAt', $3::text, 'revokeReason', $4::text)
       WHERE instance = $1 AND deployment = $2 AND status = 'active' AND NOT (id = ANY($5::text[]))
       RETURNING record`,
      [instance, deployment, now, reason, [...revokedHere]],
    );
    for (const r of rows) {
      extra.push({ op: 'putKey', key: r.record });
      eventFor({ type: 'key.revoked', instance, keyId: r.record.id, keyName: r.record.name, reason });
    }
  };

  const lockInstance = async (id: string): Promise<InstanceRow | undefined> => {
    const { rows } = await client.query<InstanceRow>(
      'SELECT deployment, state, updated_at, record FROM ob_instances WHERE id = $1 FOR UPDATE',
      [id],
    );
    return rows[0];
  };
  const upsertInstance = (inst: Instance): Promise<unknown> =>
    client.query(
      `INSERT INTO ob_instances (id, deployment, state, updated_at, record) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (id) DO UPDATE SET deployment = $2, state = $3, updated_at = $4, record = $5`,
      [inst.id, inst.deployment, inst.state, inst.updatedAt, JSON.stringify(inst)],
    );

  for (const m of batch) {
    switch (m.op) {
      case 'putInstance': {
        const inst = m.instance;
        const row = await lockInstance(inst.id);
        const halting = HALTED.includes(inst.state);
        // A pack end decided before hearing of an extension would stop the instance and revoke
        // every key of a pack that has not ended: the extension wins, and the ender hears of it.
        if (
          m.packEnd === true &&
          row !== undefined &&
          row.deployment === inst.deployment &&
          extended(row.record, inst)
        ) {
          throw obError('invalid_transition', {
            message: `The pack of "${inst.id}" was extended through another daemon meanwhile (it ends at ${row.record.packEndsAt ?? 'no set time'}); it was not ended.`,
          });
        }
        if (m.prev === undefined) {
          // An addition (or a store upgrade's rewrite of the same deployment).
          if (row !== undefined && row.deployment !== inst.deployment) {
            throw obError('instance_exists', {
              message: `Instance "${inst.id}" was added through another daemon meanwhile; pick another id or remove it first.`,
            });
          }
          if (row === undefined) await assertAllowed(client, inst.model);
          await upsertInstance(inst);
          applied.push(m);
        } else if (row !== undefined && row.deployment === m.prev.deployment && row.updated_at === m.prev.updatedAt) {
          await upsertInstance(inst);
          applied.push(m);
        } else if (
          halting &&
          row !== undefined &&
          row.deployment === inst.deployment &&
          HALT_FROM[inst.state]!.includes(row.state)
        ) {
          // Changed elsewhere meanwhile (extended, say): halt the row as it is now.
          const merged: Instance = { ...row.record, state: inst.state, updatedAt: inst.updatedAt };
          await upsertInstance(merged);
          extra.push({ op: 'putInstance', instance: merged });
        } else if (halting) {
          // Removed, re-added or already halted elsewhere: keep the revocations only, and tell
          // the caller what the row really is.
          if (row !== undefined) extra.push({ op: 'putInstance', instance: row.record });
        } else {
          throw obError('invalid_transition', {
            message: `Instance "${inst.id}" was changed through another daemon meanwhile${row === undefined ? ' (removed)' : ` (it is ${row.state} now)`}; nothing was changed. Look again with \`ob-proxy instances list\` and retry.`,
          });
        }
        if (halting) {
          const reason = reasonIn(batch, inst.id) ?? HALT_REASON[inst.state]!;
          await revokeRest(inst.id, inst.deployment, reason);
        }
        break;
      }
      case 'deleteInstance': {
        const { rows } = await client.query<{ deployment: string }>(
          'DELETE FROM ob_instances WHERE id = $1 AND ($2::text IS NULL OR deployment = $2) RETURNING deployment',
          [m.id, m.deployment ?? null],
        );
        if (rows[0] !== undefined) await revokeRest(m.id, rows[0].deployment, 'instance_removed');
        applied.push(m);
        break;
      }
      case 'putKey': {
        const key = m.key;
        const record = JSON.stringify(withoutUsage(key));
        if (key.status === 'revoked') {
          const updated = await client.query(
            `UPDATE ob_keys SET status = 'revoked', record = $2 WHERE id = $1 AND status = 'active'`,
            [key.id, record],
          );
          if (updated.rowCount === 0 && (await insertKey(client, key, record)) === 0) revokedBefore.add(key.id);
          applied.push(m);
          break;
        }
        const exists = await client.query('SELECT 1 FROM ob_keys WHERE id = $1', [key.id]);
        if (exists.rowCount !== 0) {
          // Active again is never written: revoked wins. An active key already there: done.
          applied.push(m);
          break;
        }
        const row = await lockInstance(key.instance);
        if (row === undefined || row.deployment !== key.deployment || row.state !== 'ready') {
          throw obError('instance_not_ready', {
            message: `Instance "${key.instance}" was ${row === undefined || row.deployment !== key.deployment ? 'removed' : `made ${row.state}`} through another daemon meanwhile; the key was not created.`,
          });
        }
        await insertKey(client, key, record);
        applied.push(m);
        break;
      }
      case 'setKeyLimits': {
        // Revoked keys keep the limits they had: a revocation through another daemon wins.
        const { rowCount } = await client.query(
          `UPDATE ob_keys SET record = jsonb_set(record, '{limits}', $2::jsonb) WHERE id = $1 AND status = 'active'`,
          [m.keyId, JSON.stringify(m.limits)],
        );
        if (rowCount === 0) {
          throw obError('key_revoked', {
            message: `Key ${m.keyId} was revoked through another daemon meanwhile; its limits were not changed.`,
          });
        }
        applied.push(m);
        break;
      }
      case 'setModels':
        await setModels(client, m.models, m.prev, m.disallowed);
        applied.push(m);
        break;
      case 'scheduleRevocation': {
        const { rowCount } = await client.query(
          `UPDATE ob_keys SET record = record || jsonb_build_object('revokeAt', $2::text) WHERE id = $1 AND status = 'active'`,
          [m.keyId, m.at],
        );
        if (rowCount === 0) {
          throw obError('key_revoked', {
            message: `Key ${m.keyId} was revoked through another daemon meanwhile; it was not rotated.`,
          });
        }
        applied.push(m);
        break;
      }
      case 'appendEvent':
        if (m.event.type === 'key.revoked' && m.event.keyId !== undefined && revokedBefore.has(m.event.keyId)) break;
        events.push(m.event);
        applied.push(m);
        break;
      case 'addUsage':
        usage.push(m);
        applied.push(m);
        break;
    }
  }

  if (events.length > 0) {
    // Numbered here, in place: the caller emits these very objects once the commit resolves, so
    // every daemon shows the same sequence numbers.
    const { rows } = await client.query<{ seq: string }>(
      "SELECT nextval('ob_event_seq') AS seq FROM generate_series(1, $1)",
      [events.length],
    );
    events.forEach((e, i) => {
      e.seq = Number(rows[i]!.seq);
    });
    await client.query(
      "INSERT INTO ob_events (seq, at, record) SELECT (e->>'seq')::bigint, e->>'at', e FROM jsonb_array_elements($1::jsonb) AS e",
      [JSON.stringify(events)],
    );
  }
  if (usage.length > 0) {
    await addUsageRows(client, usage);
    await addBucketRows(client, usage);
  }
  return { mutations: applied, extra };
}

/** Whether the pack in the database ends later than the one a pack end was decided on. */
function extended(row: Instance, ending: Instance): boolean {
  if (row.packEndsAt === null) return true;
  return ending.packEndsAt !== null && Date.parse(row.packEndsAt) > Date.parse(ending.packEndsAt);
}

/** The revocation reason the batch's own state event gives for the instance (pack_ended, say). */
function reasonIn(batch: readonly Mutation[], instance: string): RevokeReason | undefined {
  for (const m of batch)
    if (
      m.op === 'appendEvent' &&
      m.event.type === 'instance.state' &&
      m.event.instance === instance &&
      m.event.reason !== undefined
    )
      return m.event.reason;
  return undefined;
}

/**
 * A key's row: its record without the counters, which have columns of their own. A revoked key
 * leaves a row already there as it is (its counters are added to by addUsage, never written over).
 * Returns the rows inserted.
 */
async function insertKey(client: PoolClient, key: KeyRecord, record: string): Promise<number> {
  const u = key.usage;
  const { rowCount } = await client.query(
    `INSERT INTO ob_keys (id, hash, instance, deployment, status, record, requests, prompt_tokens, completion_tokens,
       last_used_at, reasoning_tokens, errors, disconnects, first_used_at, estimated_tokens)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)${key.status === 'revoked' ? ' ON CONFLICT (id) DO NOTHING' : ''}`,
    [
      key.id,
      key.hash,
      key.instance,
      key.deployment,
      key.status,
      record,
      u.requests,
      u.promptTokens,
      u.completionTokens,
      key.lastUsedAt,
      u.reasoningTokens,
      u.errors,
      u.disconnects,
      u.firstUsedAt,
      u.estimatedTokens,
    ],
  );
  if ((rowCount ?? 0) > 0) await insertRouteRows(client, key);
  return rowCount ?? 0;
}

function withoutUsage(key: KeyRecord): Omit<KeyRecord, 'usage' | 'lastUsedAt'> {
  const { usage: _usage, lastUsedAt: _last, ...rest } = key;
  return rest;
}
