/**
 * An in-memory daemon behind the ConsoleClient methods, for screen tests: same views, same
 * refusals (codes and the daemon's own name validation), same events, and a switch to take it
 * "down" (calls fail with daemon_unreachable, event streams end) and bring it back.
 * The real daemon is exercised by console-in-terminal.test.ts.
 */
import type { AuditEvent, RevokeReason } from '../../src/domain/key.js';
import type { LiveStatsView } from '../../src/services/live-stats.js';
import { validateKeyName } from '../../src/domain/validate.js';
import { obError } from '../../src/errors.js';
import type { KeyLimits } from '../../src/domain/key.js';
import type { PageQuery } from '../../cli/daemon-client.js';
import type {
  InstanceView,
  KeyPageView,
  KeyView,
  KeyWithSecret,
  RevocationPageView,
  RevocationView,
  RotatedKeyView,
  StatusView,
} from '../../src/wire/views.js';
import type { ConsoleClient } from '../../cli/console/console-client.js';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/** Seeded (mulberry32), so ids and hints are the same on every run and frames can be compared whole. */
function base62Source(seed: number): (n: number) => string {
  let a = seed >>> 0;
  const next = (): number => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return (n) => Array.from({ length: n }, () => BASE62[Math.floor(next() * 62)]).join('');
}

/** The page after the row whose id is `after`; an unknown cursor is refused as the daemon refuses it. */
function pageOf<T>(all: T[], id: (row: T) => string, q: PageQuery, cut = Infinity): { rows: T[]; next: string | null } {
  let start = 0;
  if (q.after !== undefined) {
    const at = all.findIndex((row) => id(row) === q.after);
    if (at === -1) throw obError('invalid_argument', { param: 'after', message: `No key has the id "${q.after}".` });
    start = at + 1;
  }
  const take = Math.min(q.limit, cut);
  const rows = all.slice(start, start + take);
  const more = start + take < all.length;
  return { rows, next: more && rows.length > 0 ? id(rows[rows.length - 1]!) : null };
}

interface Follower {
  onEvent(e: AuditEvent): void;
  end(): void;
}

const HALT_REASON: Record<string, RevokeReason> = {
  stopped: 'instance_stopped',
  failed: 'instance_failed',
  terminated: 'instance_terminated',
};

export class FakeDaemon implements ConsoleClient {
  readonly socketPath = '/tmp/obt-fake/ob-proxy.sock';
  baseUrl = 'http://127.0.0.1:8080';
  instances: InstanceView[] = [];
  keys: KeyView[] = [];
  events: AuditEvent[] = [];
  /** Every call the console made, in order: [method, ...args]. */
  calls: unknown[][] = [];
  /** Secrets the daemon still holds for undisplayed default keys. */
  private readonly undisplayed = new Map<string, string>();
  private readonly followers = new Set<Follower>();
  private isDown = false;
  private seq = 0;
  private readonly base62 = base62Source(42);
  /** Every secret handed to the console (created or revealed), so tests can look for it in frames. */
  readonly issued: string[] = [];
  /** A fixed "now" for created/updated times. */
  constructor(private readonly now: () => number = () => Date.parse('2026-11-23T12:00:00Z')) {}

  private iso(): string {
    return new Date(this.now()).toISOString();
  }

  private readonly failures = new Map<string, Error>();

  /** The next call of `method` fails with `err` (a refusal the console must show). */
  failNext(method: keyof ConsoleClient, err: Error): void {
    this.failures.set(method, err);
  }

  private guard(method: string, ...args: unknown[]): void {
    this.calls.push([method, ...args]);
    const failure = this.failures.get(method);
    if (failure !== undefined) {
      this.failures.delete(method);
      throw failure;
    }
    if (this.isDown) {
      throw obError('daemon_unreachable', {
        message: `Cannot reach the ob-proxy daemon at ${this.socketPath} (ECONNREFUSED). Start it with \`ob-proxy serve\`, or pass the right --home/--socket.`,
      });
    }
  }

  private emit(partial: Omit<AuditEvent, 'seq' | 'at'>): void {
    const e: AuditEvent = { seq: ++this.seq, at: this.iso(), ...partial };
    this.events.push(e);
    for (const f of this.followers) f.onEvent(e);
  }

  private refresh(id: string): void {
    const inst = this.instances.find((i) => i.id === id);
    if (inst !== undefined)
      inst.activeKeys = this.keys.filter((k) => k.instance === id && k.status === 'active').length;
  }

  // ---- test controls ------------------------------------------------------------------------

  addInstance(
    id: string,
    model: string,
    state: InstanceView['state'],
    extra: Partial<InstanceView> = {},
  ): InstanceView {
    const inst: InstanceView = {
      id,
      model,
      state,
      endpoint: `http://10.0.0.5:11434`,
      packEndsAt: null,
      activeKeys: 0,
      createdAt: this.iso(),
      updatedAt: this.iso(),
      health: null,
      ...extra,
    };
    this.instances.push(inst);
    this.emit({ type: 'instance.added', instance: id, state });
    return inst;
  }

  /** A key as if created earlier; returns its secret. */
  addKey(instance: string, name: string, extra: Partial<KeyView> = {}): KeyWithSecret {
    const id = this.base62(12);
    const secret = `ob_sk_${id}_${this.base62(38)}`;
    const key: KeyView = {
      id,
      name,
      instance,
      status: 'active',
      hint: `ob_sk_…${secret.slice(-4)}`,
      isDefault: false,
      createdAt: this.iso(),
      lastUsedAt: null,
      revokedAt: null,
      revokeReason: null,
      usage: {
        requests: 0,
        promptTokens: 0,
        completionTokens: 0,
        reasoningTokens: 0,
        errors: 0,
        disconnects: 0,
        estimatedTokens: 0,
        firstUsedAt: null,
        byRoute: {},
      },
      limits: { rpm: null, tpm: null, concurrency: null },
      revealable: false,
      ...extra,
    };
    this.keys.push(key);
    this.refresh(instance);
    return { ...key, secret };
  }

  /** The instance becomes ready and gets a default key; `claimed` = a waiting `instances ready` took the secret. */
  makeReady(id: string, { claimed }: { claimed: boolean }): KeyWithSecret {
    const inst = this.instances.find((i) => i.id === id)!;
    inst.state = 'ready';
    this.emit({ type: 'instance.state', instance: id, state: 'ready' });
    const created = this.addKey(id, 'default', { isDefault: true, revealable: !claimed });
    if (!claimed) this.undisplayed.set(created.id, created.secret);
    this.emit({ type: 'key.created', instance: id, keyId: created.id, keyName: 'default' });
    return created;
  }

  /** stop / fail / terminate: every key revoked, as the daemon does. */
  halt(id: string, state: 'stopped' | 'failed' | 'terminated'): void {
    const inst = this.instances.find((i) => i.id === id)!;
    const reason = HALT_REASON[state]!;
    for (const k of this.keys) {
      if (k.instance !== id || k.status !== 'active') continue;
      this.revokeInPlace(k, reason);
    }
    inst.state = state;
    this.refresh(id);
    this.emit({ type: 'instance.state', instance: id, state, reason });
  }

  /** The instance's aliases replaced, as `instances alias` through the CLI does. */
  alias(id: string, aliases: string[]): void {
    const inst = this.instances.find((i) => i.id === id)!;
    inst.aliases = [...aliases];
    this.emit({ type: 'instance.aliased', instance: id, aliases: [...aliases] });
  }

  private revokeInPlace(k: KeyView, reason: RevokeReason): void {
    k.status = 'revoked';
    k.revokedAt = this.iso();
    k.revokeReason = reason;
    k.revealable = false;
    this.undisplayed.delete(k.id);
    this.emit({ type: 'key.revoked', instance: k.instance, keyId: k.id, keyName: k.name, reason });
  }

  down(): void {
    this.isDown = true;
    for (const f of [...this.followers]) f.end();
  }

  up(): void {
    this.isDown = false;
  }

  get followerCount(): number {
    return this.followers.size;
  }

  // ---- ConsoleClient --------------------------------------------------------------------------

  /** The store's daemons as `status` gives them (a shared store); null: a file store's status. */
  daemons: StatusView['daemons'] | null = null;

  async status(): Promise<StatusView> {
    this.guard('status');
    return {
      version: '0.1.0',
      pid: 1,
      baseUrl: this.baseUrl,
      store: '/tmp/db.json',
      socket: this.socketPath,
      startedAt: this.iso(),
      models: ['gemma4:26b', 'qwen3.6:27b'],
      ...(this.daemons === null ? {} : { daemons: this.daemons }),
    };
  }

  async listInstances(): Promise<InstanceView[]> {
    this.guard('listInstances');
    return structuredClone(this.instances);
  }

  /** At most this many keys a page, with a cursor, as the daemon cuts a long filtered scan short. */
  pageCut = Infinity;

  /** As the daemon pages: by creation, `after` a key id, `next` the last id when more follow. */
  async keyPage(q: PageQuery & { status?: 'active' | 'revoked' | undefined }): Promise<KeyPageView> {
    this.guard('keyPage', { ...q });
    const all = this.keys.filter(
      (k) =>
        (q.instance === undefined || k.instance === q.instance) && (q.status === undefined || k.status === q.status),
    );
    const { rows, next } = pageOf(all, (k) => k.id, q, this.pageCut);
    return { keys: structuredClone(rows), next };
  }

  /** What stats() answers; tests set it. Null: the daemon has no stats route (an older one). */
  live: LiveStatsView | null = { at: '2026-11-23T12:00:00.000Z', instances: [] };

  async stats(): Promise<LiveStatsView> {
    this.guard('stats');
    if (this.live === null)
      throw obError('invalid_argument', {
        status: 404,
        message: 'No management route GET /v1/stats. Is the CLI newer than the daemon?',
      });
    return structuredClone(this.live);
  }

  /** By revocation, oldest first, as the daemon keeps the trail. */
  async revocationPage(q: PageQuery): Promise<RevocationPageView> {
    this.guard('revocationPage', { ...q });
    const all = this.events.flatMap((e): RevocationView[] =>
      e.type === 'key.revoked' && (q.instance === undefined || e.instance === q.instance)
        ? [{ keyId: e.keyId!, name: e.keyName!, instance: e.instance, revokedAt: e.at, reason: e.reason! }]
        : [],
    );
    const { rows, next } = pageOf(all, (r) => r.keyId, q);
    return { revocations: rows, next };
  }

  async createKey(instance: string, name: string): Promise<KeyWithSecret> {
    this.guard('createKey', instance, name);
    const valid = validateKeyName(name);
    const inst = this.instances.find((i) => i.id === instance);
    if (inst === undefined) throw obError('instance_not_found', { message: `No instance "${instance}".` });
    if (inst.state !== 'ready')
      throw obError('instance_not_ready', {
        message: `Instance ${instance} is ${inst.state}: keys can be created only for a ready instance.`,
      });
    const created = this.addKey(instance, valid);
    this.emit({ type: 'key.created', instance, keyId: created.id, keyName: valid });
    this.issued.push(created.secret);
    return created;
  }

  async revokeKey(id: string): Promise<KeyView> {
    this.guard('revokeKey', id);
    const k = this.keys.find((x) => x.id === id);
    if (k === undefined) throw obError('key_not_found');
    if (k.status === 'revoked') throw obError('key_revoked');
    this.revokeInPlace(k, 'manual');
    this.refresh(k.instance);
    return structuredClone(k);
  }

  async revealKey(id: string): Promise<KeyWithSecret> {
    this.guard('revealKey', id);
    const k = this.keys.find((x) => x.id === id);
    const secret = this.undisplayed.get(id);
    if (k === undefined || secret === undefined) throw obError('reveal_refused');
    this.undisplayed.delete(id);
    k.revealable = false;
    this.emit({ type: 'key.revealed', instance: k.instance, keyId: id, keyName: k.name });
    this.issued.push(secret);
    return { ...structuredClone(k), secret };
  }

  async move(id: string, action: 'stop' | 'fail' | 'terminate'): Promise<InstanceView> {
    this.guard('move', id, action);
    const inst = this.instances.find((i) => i.id === id);
    if (inst === undefined) throw obError('instance_not_found', { message: `No instance "${id}".` });
    if (inst.state === 'stopped' || inst.state === 'failed' || inst.state === 'terminated')
      throw obError('invalid_transition', { message: `Instance ${id} is ${inst.state}.` });
    this.halt(id, ({ stop: 'stopped', fail: 'failed', terminate: 'terminated' } as const)[action]);
    return structuredClone(inst);
  }

  async extend(id: string, packEndsAt: string): Promise<InstanceView> {
    this.guard('extend', id, packEndsAt);
    const inst = this.instances.find((i) => i.id === id);
    if (inst === undefined) throw obError('instance_not_found', { message: `No instance "${id}".` });
    if (inst.packEndsAt !== null && Date.parse(packEndsAt) < Date.parse(inst.packEndsAt))
      throw obError('invalid_argument', {
        message: `The pack of ${id} ends ${inst.packEndsAt}; ${packEndsAt} is sooner (pass shorten to allow it).`,
      });
    inst.packEndsAt = packEndsAt;
    this.emit({ type: 'instance.extended', instance: id, packEndsAt });
    return structuredClone(inst);
  }

  async getKey(id: string): Promise<KeyView> {
    this.guard('getKey', id);
    const k = this.keys.find((x) => x.id === id);
    if (k === undefined) throw obError('key_not_found');
    return structuredClone(k);
  }

  async setKeyLimits(id: string, limits: Partial<KeyLimits>): Promise<KeyView> {
    this.guard('setKeyLimits', id, limits);
    const k = this.keys.find((x) => x.id === id);
    if (k === undefined) throw obError('key_not_found');
    if (k.status === 'revoked') throw obError('key_revoked');
    k.limits = { ...k.limits!, ...limits };
    this.emit({ type: 'key.limited', instance: k.instance, keyId: id, keyName: k.name });
    return structuredClone(k);
  }

  async rotateKey(id: string, graceSeconds?: number): Promise<RotatedKeyView> {
    this.guard('rotateKey', id, graceSeconds);
    const old = this.keys.find((x) => x.id === id);
    if (old === undefined) throw obError('key_not_found');
    if (old.status === 'revoked') throw obError('key_revoked');
    const created = this.addKey(old.instance, old.name, { limits: old.limits });
    this.issued.push(created.secret);
    if (graceSeconds === undefined) this.revokeInPlace(old, 'rotated');
    else old.revokeAt = new Date(this.now() + graceSeconds * 1000).toISOString();
    this.refresh(old.instance);
    this.emit({ type: 'key.created', instance: old.instance, keyId: created.id, keyName: created.name });
    this.emit({ type: 'key.rotated', instance: old.instance, keyId: id, keyName: old.name, newKeyId: created.id });
    return { ...created, replaces: structuredClone(old) };
  }

  async follow(onEvent: (e: AuditEvent) => void, signal: AbortSignal, onOpen?: () => void): Promise<void> {
    this.guard('follow');
    await new Promise<void>((resolve) => {
      const f: Follower = {
        onEvent,
        end: () => {
          this.followers.delete(f);
          resolve();
        },
      };
      this.followers.add(f);
      signal.addEventListener('abort', () => f.end(), { once: true });
      onOpen?.();
    });
  }
}
