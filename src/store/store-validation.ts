import { INSTANCE_STATES, type Instance } from '../domain/instance.js';
import {
  type AuditEvent,
  type AuditEventType,
  type KeyRecord,
  type KeyUsage,
  LIMIT_NAMES,
  REVOKE_REASONS,
  noLimits,
  normalizeUsage,
} from '../domain/key.js';
import { MODEL_ID_RULE, isModelId } from '../domain/model-id.js';
import { LIMIT_MAX } from '../domain/validate.js';
import { ROUTE_NAME_RE } from '../domain/route-usage.js';
import type { UsageBucket } from '../domain/usage-buckets.js';
import { STORE_VERSION, type StoreData } from './store.js';

/**
 * A record in the store that ob-proxy cannot use as it is. Thrown before anything is served or
 * written, so a hand-edited or damaged file is reported, never half-used: `instances:[null]` used
 * to surface as a bare TypeError, and a `packEndsAt` that does not parse re-armed the pack timer
 * every millisecond and never ended the pack.
 */
export class StoreRecordError extends Error {
  constructor(
    readonly location: string,
    readonly record: string,
    readonly field: string | null,
    problem: string,
  ) {
    super(
      `The store ${location} has a record ob-proxy cannot use: ${record}${field === null ? '' : `, field "${field}"`}: ${problem}. ` +
        'The file was left untouched. Fix that record by hand (or restore the file from a backup) and start again.',
    );
    this.name = 'StoreRecordError';
  }
}

const AUDIT_TYPES: readonly AuditEventType[] = [
  'instance.added',
  'instance.state',
  'instance.extended',
  'instance.aliased',
  'instance.removed',
  'key.created',
  'key.revealed',
  'key.revoked',
  'key.limited',
  'key.rotated',
  'models.changed',
];
// Stored times are written by toISOString(); a zone is still required so nothing is guessed.
const TIME_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/;
const HASH_RE = /^[0-9a-f]{64}$/;
const KEY_ID_RE = /^[0-9A-Za-z]{1,64}$/;
const INSTANCE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/;

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Checks one record's fields; each failure names the record and the field. `record` may be a
 * function, its name made only on a failure (a name made per key was a tenth of the check at
 * 500,000 keys).
 */
class RecordCheck {
  constructor(
    private readonly location: string,
    private readonly record: string | (() => string),
    readonly o: Obj,
  ) {}

  fail(field: string | null, problem: string): never {
    const record = typeof this.record === 'string' ? this.record : this.record();
    throw new StoreRecordError(this.location, record, field, problem);
  }

  string(field: string, re?: RegExp, what?: string): string {
    const v = this.o[field];
    if (typeof v !== 'string' || v === '') this.fail(field, `expected a non-empty string, found ${show(v)}`);
    if (re !== undefined && !re.test(v)) this.fail(field, `${show(v)} is not ${what ?? 'valid'}`);
    return v;
  }

  optionalString(field: string): void {
    const v = this.o[field];
    if (v !== undefined && v !== null && typeof v !== 'string')
      this.fail(field, `expected a string or null, found ${show(v)}`);
  }

  time(field: string, nullable = false): void {
    const v = this.o[field];
    if (nullable && v === null) return;
    if (typeof v !== 'string' || !TIME_RE.test(v) || Number.isNaN(Date.parse(v))) {
      this.fail(
        field,
        `expected an ISO 8601 time with a zone (e.g. 2026-12-01T18:00:00.000Z)${nullable ? ' or null' : ''}, found ${show(v)}`,
      );
    }
  }

  oneOf(field: string, values: readonly string[], nullable = false): void {
    const v = this.o[field];
    if (nullable && v === null) return;
    if (typeof v !== 'string' || !values.includes(v))
      this.fail(field, `expected one of ${values.join(', ')}${nullable ? ' or null' : ''}, found ${show(v)}`);
  }

  count(field: string, o: Obj = this.o, prefix = ''): void {
    const v = o[field];
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0)
      this.fail(`${prefix}${field}`, `expected a whole number ≥ 0, found ${show(v)}`);
  }
}

function show(v: unknown): string {
  if (v === undefined) return 'nothing';
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 60 ? `${text.slice(0, 57)}…` : text;
}

function checkInstance(location: string, raw: unknown, index: number): Instance {
  const label =
    isObj(raw) && typeof raw.id === 'string' ? `instances[${index}] (id ${show(raw.id)})` : `instances[${index}]`;
  if (!isObj(raw)) throw new StoreRecordError(location, label, null, `expected an object, found ${show(raw)}`);
  const c = new RecordCheck(location, label, raw);
  c.string('id', INSTANCE_ID_RE, 'an instance id (1-64 letters, digits, . _ : -)');
  // Version 1 stores had no deployment ids: the upgrade gives each instance one.
  if (raw.deployment !== undefined) c.string('deployment');
  c.string('model');
  if (raw.endpoint !== null) {
    const endpoint = c.string('endpoint');
    if (!/^https?:\/\/[^\s]+$/.test(endpoint)) c.fail('endpoint', `${show(endpoint)} is not an http(s) URL`);
  }
  c.oneOf('state', INSTANCE_STATES);
  c.time('packEndsAt', true);
  c.optionalString('upstreamTokenFile');
  // Instances written before aliases existed have none (no store version change needed).
  if (raw.aliases === undefined) raw.aliases = [];
  const aliases: unknown = raw.aliases;
  if (!Array.isArray(aliases)) return c.fail('aliases', `expected a list of model ids, found ${show(aliases)}`);
  aliases.forEach((a: unknown, i: number) => {
    if (!isModelId(a)) c.fail(`aliases[${i}]`, `${show(a)} is not a model id (${MODEL_ID_RULE})`);
  });
  c.time('createdAt');
  c.time('updatedAt');
  return raw as unknown as Instance;
}

function checkKey(location: string, raw: unknown, index: number): KeyRecord {
  if (!isObj(raw))
    throw new StoreRecordError(location, `keys[${index}]`, null, `expected an object, found ${show(raw)}`);
  const label = (): string => (typeof raw.id === 'string' ? `keys[${index}] (id ${show(raw.id)})` : `keys[${index}]`);
  const c = new RecordCheck(location, label, raw);
  c.string('id', KEY_ID_RE, 'a key id');
  if (typeof raw.name !== 'string') c.fail('name', `expected a string, found ${show(raw.name)}`);
  c.string('instance');
  if (raw.deployment !== undefined) c.string('deployment');
  c.string('hash', HASH_RE, 'a SHA-256 digest (64 lower-case hex digits)');
  if (typeof raw.hint !== 'string') c.fail('hint', `expected a string, found ${show(raw.hint)}`);
  if (typeof raw.isDefault !== 'boolean') c.fail('isDefault', `expected true or false, found ${show(raw.isDefault)}`);
  c.oneOf('status', ['active', 'revoked']);
  c.time('createdAt');
  c.time('lastUsedAt', true);
  c.time('revokedAt', true);
  c.oneOf('revokeReason', REVOKE_REASONS, true);
  // Only keys whose rotation has a grace hold it.
  if (raw.revokeAt !== undefined) c.time('revokeAt', true);
  if (raw.status === 'revoked' && (raw.revokedAt === null || raw.revokeReason === null)) {
    c.fail(
      raw.revokedAt === null ? 'revokedAt' : 'revokeReason',
      'a revoked key needs the time and the reason of its revocation',
    );
  }
  const usage = raw.usage;
  if (!isObj(usage))
    return c.fail('usage', `expected {"requests","promptTokens","completionTokens"}, found ${show(usage)}`);
  for (const f of ['requests', 'promptTokens', 'completionTokens']) c.count(f, usage, 'usage.');
  // Keys written before limits existed have none: no limit (no store version change needed).
  if (raw.limits === undefined) raw.limits = noLimits();
  const limits = raw.limits;
  if (!isObj(limits)) return c.fail('limits', `expected {"rpm","tpm","concurrency"}, found ${show(limits)}`);
  for (const f of LIMIT_NAMES) {
    const v = limits[f] ?? null;
    if (v !== null && (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1 || v > LIMIT_MAX))
      c.fail(`limits.${f}`, `expected null or a whole number from 1 to ${LIMIT_MAX}, found ${show(v)}`);
    limits[f] = v;
  }
  // Counters added to the store later: a store written before them holds none of them, and none
  // were counted.
  for (const f of ['reasoningTokens', 'errors', 'disconnects', 'estimatedTokens'])
    if (usage[f] !== undefined) c.count(f, usage, 'usage.');
  const first = usage.firstUsedAt;
  if (
    first !== undefined &&
    first !== null &&
    (typeof first !== 'string' || !TIME_RE.test(first) || Number.isNaN(Date.parse(first)))
  ) {
    c.fail('usage.firstUsedAt', `expected an ISO 8601 time with a zone or null, found ${show(first)}`);
  }
  // The split by route came later still: a store written before it holds none.
  const byRoute = usage.byRoute;
  if (byRoute !== undefined) {
    if (!isObj(byRoute)) return c.fail('usage.byRoute', `expected {"<route>": {"requests",…}}, found ${show(byRoute)}`);
    for (const [route, counts] of Object.entries(byRoute)) {
      if (!ROUTE_NAME_RE.test(route))
        c.fail('usage.byRoute', `${show(route)} is not a route name (chat, responses, completions, messages)`);
      const at = `usage.byRoute.${route}`;
      if (!isObj(counts))
        return c.fail(at, `expected {"requests","promptTokens","completionTokens"}, found ${show(counts)}`);
      for (const f of ['requests', 'promptTokens', 'completionTokens']) c.count(f, counts, `${at}.`);
    }
  }
  raw.usage = normalizeUsage(usage as unknown as KeyUsage);
  return raw as unknown as KeyRecord;
}

function checkEvent(location: string, raw: unknown, index: number): AuditEvent {
  const label = `events[${index}]`;
  if (!isObj(raw)) throw new StoreRecordError(location, label, null, `expected an object, found ${show(raw)}`);
  const c = new RecordCheck(location, label, raw);
  if (typeof raw.seq !== 'number' || !Number.isSafeInteger(raw.seq) || raw.seq < 1)
    c.fail('seq', `expected a whole number ≥ 1, found ${show(raw.seq)}`);
  c.time('at');
  c.oneOf('type', AUDIT_TYPES);
  // The allowed list is the store's, no instance's: its events name none.
  if (raw.type === 'models.changed') {
    if (raw.instance !== '') c.fail('instance', `expected "" for a models.changed event, found ${show(raw.instance)}`);
  } else c.string('instance');
  if (raw.keyId !== undefined) c.string('keyId');
  if (raw.reason !== undefined) c.oneOf('reason', REVOKE_REASONS);
  if (raw.type === 'key.revoked' && typeof raw.keyId !== 'string')
    c.fail('keyId', 'a key.revoked event must name its key');
  return raw as unknown as AuditEvent;
}

/** What a store guarantees of its records itself, so the check need not look again. */
export interface StoreGuarantees {
  /**
   * No key id or key hash appears twice: a database whose columns are unique says so. Looking
   * for repeats takes two maps of every key, a second and a half of a start at 1,000,000 keys.
   */
  uniqueKeys?: boolean;
}

/**
 * Checks every record of a parsed store file and returns it typed. Records of version-1 stores
 * (no `deployment`) pass: the upgrade in LifecycleService.open fills them in.
 */
export function validateStoreData(location: string, raw: unknown, guarantees: StoreGuarantees = {}): StoreData {
  if (!isObj(raw) || !Array.isArray(raw.instances) || !Array.isArray(raw.keys)) {
    throw new Error(
      `The store ${location} is not an ob-proxy store (no "instances" and "keys" lists). It was left untouched.`,
    );
  }
  const version = raw.version;
  if (typeof version !== 'number' || !Number.isSafeInteger(version) || version < 1) {
    throw new StoreRecordError(
      location,
      'the file',
      'version',
      `expected a store version (1 to ${STORE_VERSION}), found ${show(version)}`,
    );
  }
  if (version > STORE_VERSION) {
    throw new Error(
      `The store ${location} was written by a newer ob-proxy (version ${version}). Upgrade ob-proxy. It was left untouched.`,
    );
  }
  const events = raw.events ?? [];
  if (!Array.isArray(events))
    throw new StoreRecordError(location, 'the file', 'events', `expected a list, found ${show(events)}`);

  const instances = raw.instances.map((r, i) => checkInstance(location, r, i));
  const keys = raw.keys.map((r, i) => checkKey(location, r, i));
  const checkedEvents = events.map((r, i) => checkEvent(location, r, i));

  // Duplicates would make one record silently shadow another in the in-memory maps.
  const firstIndex = new Map<string, number>();
  instances.forEach((inst, i) => {
    const seen = firstIndex.get(inst.id);
    if (seen !== undefined)
      throw new StoreRecordError(
        location,
        `instances[${i}] (id ${show(inst.id)})`,
        'id',
        `instances[${seen}] has the same id`,
      );
    firstIndex.set(inst.id, i);
  });
  if (guarantees.uniqueKeys !== true) refuseRepeatedKeys(location, keys);
  const buckets = raw.usageBuckets ?? [];
  if (!Array.isArray(buckets))
    throw new StoreRecordError(location, 'the file', 'usageBuckets', `expected a list, found ${show(buckets)}`);
  return {
    version,
    instances,
    keys,
    events: checkedEvents,
    ...checkModels(location, raw.models),
    ...(buckets.length === 0 ? {} : { usageBuckets: buckets.map((r, i) => checkBucket(location, r, i)) }),
  };
}

/** Two keys with one id or one hash would make one record silently shadow the other in the maps. */
function refuseRepeatedKeys(location: string, keys: readonly KeyRecord[]): void {
  const ids = new Set<string>();
  const hashes = new Set<string>();
  // One set operation a key and set where none repeats (a million keys: each about a microsecond).
  keys.forEach((k, i) => {
    if (ids.size === ids.add(k.id).size) {
      const first = keys.findIndex((o) => o.id === k.id);
      throw new StoreRecordError(location, `keys[${i}] (id ${show(k.id)})`, 'id', `keys[${first}] has the same id`);
    }
    if (hashes.size === hashes.add(k.hash).size) {
      const first = keys.findIndex((o) => o.hash === k.hash);
      throw new StoreRecordError(location, `keys[${i}] (id ${show(k.id)})`, 'hash', `keys[${first}] has the same hash`);
    }
  });
}

/** One key's usage in one hour or day. */
function checkBucket(location: string, raw: unknown, index: number): UsageBucket {
  const label = `usageBuckets[${index}]`;
  if (!isObj(raw)) throw new StoreRecordError(location, label, null, `expected an object, found ${show(raw)}`);
  const c = new RecordCheck(location, label, raw);
  c.string('keyId', KEY_ID_RE, 'a key id');
  c.oneOf('size', ['hour', 'day']);
  c.time('start');
  for (const f of ['requests', 'promptTokens', 'completionTokens', 'errors']) c.count(f);
  return raw as unknown as UsageBucket;
}

/** The allowed model list, when one was ever set: a list of model ids, at least one. */
function checkModels(location: string, models: unknown): Pick<StoreData, 'models'> {
  if (models === undefined || models === null) return {};
  if (!Array.isArray(models) || models.length === 0)
    throw new StoreRecordError(location, 'the file', 'models', `expected a list of model ids, found ${show(models)}`);
  models.forEach((m: unknown, i: number) => {
    if (!isModelId(m))
      throw new StoreRecordError(
        location,
        'the file',
        `models[${i}]`,
        `${show(m)} is not a model id (${MODEL_ID_RULE})`,
      );
  });
  return { models: models as string[] };
}
