/**
 * Daemons of one PostgreSQL store kept in sync through what goes wrong: a paused peer, a dead
 * LISTEN connection, a store gone stale, a restored backup, a pack extended at its end. One
 * describe per defect found, its story above it.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import pg from 'pg';
import { request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { obError } from '../../src/errors.js';
import { POOL_SESSION_SETTINGS } from '../../src/store/postgres/pools.js';
import { holdCounter } from '../helpers/postgres-faults.js';
import { PostgresRig, usePostgresRig } from '../helpers/postgres-rig.js';
import { type Cluster, freshDatabase, startCluster, type TestDatabase } from '../helpers/postgres.js';
import { eventually, type SimProcess, startSimulate } from '../helpers/processes.js';
import { holdBody } from '../helpers/raw-http.js';
import { modelsStatus, ServeNodes } from '../helpers/serve-nodes.js';
import { type Harness, MODEL, post, readyInstance, startHarness, startSim } from '../reliability/harness.js';

/**
 * Regression: a daemon of a PostgreSQL cluster paused (Ctrl-Z, a container or VM pause) inside
 * its usage flush. Its session stayed `idle in transaction` with the change counter row locked,
 * because the pool set no idle-in-transaction time-out, so every write of every daemon failed
 * (each after 10 s) for as long as it stayed paused. Now the pool's sessions carry
 * `idle_in_transaction_session_timeout` (4 s) and a lock time-out just above it (5 s): the
 * server ends the paused session, and a write waiting behind it goes through.
 *
 * The paused daemon is a session opened with the daemons' own pool settings, left idle in
 * transaction holding the row, as a daemon stopped between two statements of its flush leaves it.
 */
describe('a paused peer holding the counter row blocks writes for the idle time-out only', () => {
  const rig = new PostgresRig();
  let paused: pg.Client | undefined;

  beforeAll(() => rig.start());
  afterAll(async () => {
    await paused?.end().catch(() => {});
    await rig.stop();
  }, 60_000);

  it('a peer paused holding the counter row blocks the cluster’s writes for the idle-in-transaction time-out only', async () => {
    const { a, b } = await rig.twoDaemons();

    paused = await holdCounter(rig.db.url, POOL_SESSION_SETTINGS);
    const ended = new Promise<Error>((resolve) => paused!.once('error', resolve));
    // A write through A waits for the row, and gets it once the server ends the paused session
    // (what ends it is the server's idle-in-transaction time-out, not the write's lock time-out).
    const created = await a.api.createKey('gpu-1', 'after-pause');
    expect(created.secret).toMatch(/^ob_sk_/);
    expect((await ended).message).toMatch(/idle-in-transaction timeout/);
    // The paused session was ended by the server, with its lock: nothing is left idle in a transaction.
    const idle = await rig.admin.query<{ n: string }>(
      "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND state LIKE 'idle in transaction%'",
    );
    expect(Number(idle.rows[0]!.n)).toBe(0);
    await expect(paused.query('SELECT 1')).rejects.toThrow(/not queryable|terminat/);
    await eventually(async () => (await modelsStatus(b, created.secret)) === 200, 'B serves the new key', 2000);
    const { rows } = await rig.admin.query<{ n: string }>(
      "SELECT count(*) AS n FROM ob_keys WHERE record->>'name' = 'after-pause' AND status = 'active'",
    );
    expect(Number(rows[0]!.n)).toBe(1);
  }, 60_000);
});

/**
 * Regression: a daemon's LISTEN connection dropped silently (a firewall or
 * NAT forgot it, a half-open TCP connection: no error, no end). Each catch-up period first checked
 * that connection with a query, and read the change log only once that query answered; on a
 * dead connection it answered only at its 10 s time-out. So the catch-up read, the one thing
 * that bounds a lost notification, stalled for ten seconds every period, and a key revoked
 * through another daemon was served for that long.
 * Now the catch-up read never waits on the session connection (checked beside it, with a short
 * time-out, and replaced when it does not answer): the revocation is refused within the
 * catch-up period, as documented for lost notifications.
 */
describe('the catch-up read goes on past a dead LISTEN connection', () => {
  const MODEL = 'gemma4:26b';

  /**
   * A TCP relay to PostgreSQL that can silence the connections that sent LISTEN: from then on it
   * passes nothing either way and closes nothing, as a network that lost the connection's state.
   */
  class SilencingRelay {
    private readonly listening = new Set<Socket>();
    private readonly silenced = new Set<Socket>();
    private readonly sockets = new Set<Socket>();
    readonly server: Server;

    constructor(target: URL) {
      this.server = createServer((client) => {
        const upstream = connect(Number(target.port || 5432), target.hostname);
        this.sockets.add(client).add(upstream);
        client.on('data', (b: Buffer) => {
          if (b.includes('LISTEN ')) this.listening.add(client);
          if (!this.silenced.has(client)) upstream.write(b);
        });
        upstream.on('data', (b: Buffer) => {
          if (!this.silenced.has(client)) client.write(b);
        });
        const close = (): void => {
          client.destroy();
          upstream.destroy();
        };
        client.on('error', close).on('close', close);
        upstream.on('error', close).on('close', close);
      });
    }

    async listen(): Promise<number> {
      await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
      return (this.server.address() as { port: number }).port;
    }

    /** Silences every connection that LISTENs now; returns how many. */
    silenceListeners(): number {
      for (const s of this.listening) this.silenced.add(s);
      return this.listening.size;
    }

    listeners(): number {
      return this.listening.size;
    }

    close(): Promise<void> {
      for (const s of this.sockets) s.destroy();
      return new Promise((r) => this.server.close(() => r()));
    }
  }

  let sim: SimProcess;
  let db: TestDatabase;
  let relay: SilencingRelay;
  const nodes = new ServeNodes();

  beforeAll(async () => {
    sim = await startSimulate([MODEL], ['--chunks', '1']);
    db = await freshDatabase();
    relay = new SilencingRelay(new URL(db.url));
  });
  afterAll(async () => {
    await nodes.stopAll();
    await relay?.close();
    await db?.drop();
    await sim?.stop();
  }, 60_000);

  it('a silently dropped LISTEN connection does not hold up the catch-up read', async () => {
    const env = { OB_PROXY_STORE_CATCHUP_MS: '250' };
    const a = await nodes.start(db.url, env);
    const viaRelay = new URL(db.url);
    viaRelay.port = String(await relay.listen());
    const b = await nodes.start(viaRelay.toString(), env);

    await a.api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: sim.url });
    await a.api.ready('gpu-1', { wait: true });
    const key = await a.api.createKey('gpu-1', 'team');
    await eventually(async () => (await modelsStatus(b, key.secret)) === 200, 'B serves the key');

    expect(relay.silenceListeners()).toBe(1);
    await a.api.revokeKey(key.id);
    // Within a few catch-up periods (250 ms each); the session check's time-out was 10 s.
    await eventually(async () => (await modelsStatus(b, key.secret)) === 401, 'B refuses the revoked key', 6_000);
    // B is still in sync (its reads go through other connections) and hears later changes too.
    const next = await a.api.createKey('gpu-1', 'next');
    await eventually(async () => (await modelsStatus(b, next.secret)) === 200, 'B serves a key created later', 4_000);
    // And it replaced the silent connection (its time-out is 3 s): notifications reach it again.
    await eventually(
      () => b.serve.lines.some((l) => l.includes('session connection lost') && l.includes('opening another')),
      'B replaces its LISTEN connection',
      10_000,
    );
    await eventually(() => relay.listeners() === 2, 'B LISTENs on a new connection', 10_000);
  }, 60_000);
});

/**
 * Regression: a daemon on a shared store that has not heard from it for `--max-stale` refuses every
 * key with 503 store_unreachable "rather than risk serving a key revoked elsewhere" (docs/contract.md §4),
 * but only when a request's headers arrived. A request whose headers came while it was in sync was
 * still sent upstream once stale: a body held back until then (Expect: 100-continue), and a
 * request waiting in its instance's queue when its turn came, were answered 200 by the model
 * server, with a key the daemon could no longer vouch for. The check made when the request is sent
 * upstream (the re-check of checks 2 to 5) now refuses them with 503 store_unreachable too, and
 * nothing reaches the model server.
 */
describe('a request held until the store went stale is refused when sent upstream', () => {
  let cluster: Cluster;
  let h: Harness;
  let sim: Simulator;
  let key: string;
  /** A second instance: its own admission slot, for a plain request pending upstream. */
  let key2: string;

  beforeAll(async () => {
    cluster = await startCluster();
    h = await startHarness({ store: cluster.url, maxStaleMs: 1_000, storeCatchupMs: 200, maxConcurrency: 1 });
    const started = await startSim();
    sim = started.sim;
    key = await readyInstance(h, 'gpu-1', started.url);
    key2 = await readyInstance(h, 'gpu-2', started.url);
  }, 60_000);

  afterAll(async () => {
    // The store is gone for good: the daemon stops without writing its last usage counts.
    await h?.stop().catch(() => {});
    await sim?.close();
    await cluster?.destroy();
  }, 60_000);

  // The whole body, as the daemon answers a key it cannot vouch for.
  const STORE_UNREACHABLE = obError('store_unreachable').toBody();

  function body(tag: string, extra = ''): string {
    return JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: `${tag}${extra}` }] });
  }

  const seen = (tag: string): boolean => sim.requests.some((r) => JSON.stringify(r.body).includes(tag));

  it(
    'out of reach of the store for --max-stale: a stream in flight ends, a queued request and a held body get 503, none reaches the model server',
    { timeout: 60_000 },
    async () => {
      // One request holds the instance's only slot, a second waits in its queue, a third holds its body.
      const first = await request(`${h.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: MODEL,
          stream: true,
          messages: [{ role: 'user', content: 'first [[sim chunks=100000 tokensPerSecond=20]]' }],
        }),
      });
      expect(first.statusCode).toBe(200);
      let streamed = '';
      first.body.setEncoding('utf8').on('data', (d: string) => (streamed += d));
      let firstEnded = false;
      first.body.once('end', () => (firstEnded = true)).once('error', () => (firstEnded = true));
      const queued = post(h.baseUrl, key, body('tag-queued'));
      await eventually(() => h.daemon.ctx.admission?.depth('gpu-1') === 1, 'the second request queued');
      const held = await holdBody(h.baseUrl, key, body('tag-held'));
      // A plain answer the model server takes its time over: pending upstream when the store goes.
      const pending = post(h.baseUrl, key2, body('tag-pending', ' [[sim chunks=100000 tokensPerSecond=20]]'));
      await eventually(() => seen('tag-pending'), 'the plain request to reach the model server');

      await cluster.kill9();
      await eventually(() => h.daemon.ctx.storeStale, 'the daemon to count itself out of sync', 10_000);

      // The stream in flight ends with one error event and no [DONE]; that frees the instance's
      // slot, and the queued request's turn comes.
      await eventually(() => firstEnded, 'the stream in flight to end', 10_000);
      const events = streamed.split('\n\n').filter((f) => f !== '');
      expect(events.at(-1)).toMatch(/^data: \{"error"/);
      expect(JSON.parse((events.at(-1) as string).slice(6))).toEqual(STORE_UNREACHABLE);
      expect(streamed).not.toContain('[DONE]');
      const q = await queued;
      expect(q.status).toBe(503);
      expect(q.headers['retry-after']).toBe('5');
      expect(q.json).toEqual(STORE_UNREACHABLE);

      const late = await held.send();
      expect(late.status).toBe(503);
      expect(late.headers['retry-after']).toBe('5');
      expect(JSON.parse(late.body)).toEqual(STORE_UNREACHABLE);

      // The plain request pending upstream is answered 503 too, with the same Retry-After.
      const p = await pending;
      expect({ status: p.status, retryAfter: p.headers['retry-after'], json: p.json }).toEqual({
        status: 503,
        retryAfter: '5',
        json: STORE_UNREACHABLE,
      });

      expect(seen('tag-held')).toBe(false);
      expect(seen('tag-queued')).toBe(false);
    },
  );
});

/**
 * Regression: the PostgreSQL store restored from an older backup while the
 * daemons run (or a failover to a replica that lagged). The change counter went back, and:
 * - a running daemon, whose last change number was now ahead of the database's, read "no
 *   changes" every period and stayed "in sync": every later change numbered up to its old
 *   number was skipped, so a key revoked after the restore through another daemon was still
 *   answered 200 by it, for ever;
 * - a key revoked before the restore was active again in the database, and a daemon started
 *   (or restarted) afterwards served it.
 * Now a daemon whose change number is ahead of the database's, or whose last change the
 * database no longer holds as it heard it, reloads the whole state, and writes back every
 * revocation it knows that the database lacks ("revoked wins", as the lowdb store does with
 * its revocation journal): each revocation is refused by every daemon, old and new.
 */
describe('revocations hold on every daemon across a restored PostgreSQL backup', () => {
  const TABLES = ['ob_meta', 'ob_instances', 'ob_keys', 'ob_events', 'ob_changes'];
  const ENV = { OB_PROXY_STORE_CATCHUP_MS: '250' };

  const rig = usePostgresRig();

  /** A backup as pg_dump takes it: a copy of every table of the store, and the event sequence. */
  async function backup(): Promise<number> {
    for (const t of TABLES) await rig.admin.query(`CREATE TABLE bk_${t} AS SELECT * FROM ${t}`);
    const { rows } = await rig.admin.query<{ last_value: string }>('SELECT last_value FROM ob_event_seq');
    return Number(rows[0]!.last_value);
  }

  /** Restores it in place, as `pg_restore --clean` would, while the daemons run. */
  async function restore(eventSeq: number): Promise<void> {
    await rig.admin.query('BEGIN');
    await rig.admin.query(`TRUNCATE ${TABLES.join(', ')}`);
    for (const t of TABLES) await rig.admin.query(`INSERT INTO ${t} SELECT * FROM bk_${t}`);
    await rig.admin.query('SELECT setval($1, $2)', ['ob_event_seq', eventSeq]);
    await rig.admin.query('COMMIT');
  }

  it('a database restored from an older backup: revocations made before and after it hold on every daemon', async () => {
    const { a, b } = await rig.twoDaemons(ENV);
    const early = await a.api.createKey('gpu-1', 'early');
    const late = await a.api.createKey('gpu-1', 'late');
    for (const n of [a, b])
      for (const k of [early, late])
        await eventually(async () => (await modelsStatus(n, k.secret)) === 200, 'every daemon serves both keys');
    const seq = await backup();

    // Revoked after the backup was taken: enough changes that the daemons' numbers pass the backup's.
    await a.api.revokeKey(early.id);
    for (let i = 0; i < 3; i++) await a.api.revokeKey((await a.api.createKey('gpu-1', `filler-${i}`)).id);
    for (const n of [a, b])
      await eventually(async () => (await modelsStatus(n, early.secret)) === 401, 'every daemon refuses the early key');

    await restore(seq);
    // Revoked through A after the restore: its change number is one B had already passed.
    await a.api.revokeKey(late.id);

    for (const n of [a, b])
      await eventually(
        async () => (await modelsStatus(n, late.secret)) === 401,
        'every daemon refuses the late key',
        10_000,
      );
    // A daemon started now reads the database: the early revocation was written back into it.
    const c = await rig.nodes.start(rig.db.url, ENV);
    await eventually(
      async () => (await modelsStatus(c, early.secret)) === 401 && (await modelsStatus(c, late.secret)) === 401,
      'a daemon started after the restore refuses both keys',
      10_000,
    );
    const { rows } = await rig.admin.query<{ id: string; status: string }>(
      'SELECT id, status FROM ob_keys WHERE id = ANY($1) ORDER BY id',
      [[early.id, late.id]],
    );
    expect(rows.map((r) => r.status)).toEqual(['revoked', 'revoked']);
    // One key.revoked event each in the trail, though both running daemons reloaded at once.
    const events = await rig.admin.query<{ n: string }>(
      "SELECT record->>'keyId' AS id, count(*) AS n FROM ob_events WHERE record->>'type' = 'key.revoked' AND record->>'keyId' = ANY($1) GROUP BY 1 ORDER BY 1",
      [[early.id, late.id]],
    );
    expect(events.rows.map((r) => Number(r.n))).toEqual([1, 1]);
    // Both daemons that ran said what happened.
    for (const n of [a, b]) expect(n.serve.lines.join('\n')).toContain('went back from change');
    // The key that was never revoked still works everywhere.
    const fresh = await a.api.createKey('gpu-1', 'after');
    for (const n of [a, b, c])
      await eventually(async () => (await modelsStatus(n, fresh.secret)) === 200, 'every daemon serves a new key');
  }, 60_000);
});

/**
 * Regression: a pack extended through daemon A just before it was due, while
 * daemon B (the one ending packs) had not heard of the extension yet. B's timer ended the pack
 * from its stale view, and the store took that halt "decided on a stale view" like a stop: the
 * instance was stopped with the new packEndsAt and every key revoked, on every daemon. The
 * extension the operator was told had succeeded was lost, and the keys with it.
 * Now a pack end is written only if the pack in the database still ends when B thought it did:
 * a pack extended meanwhile is refused by the store, B hears the extension at once and serves
 * the keys again (it refused them from the old packEndsAt meanwhile, as every daemon does), and
 * nothing is revoked.
 */
describe('a pack end decided on a stale view yields to the extension', () => {
  const MODEL = 'gemma4:26b';

  let sim: SimProcess;
  let db: TestDatabase;
  const nodes = new ServeNodes();

  beforeAll(async () => {
    sim = await startSimulate([MODEL], ['--chunks', '1']);
    db = await freshDatabase();
  });
  afterAll(async () => {
    await nodes.stopAll();
    await db?.drop();
    await sim?.stop();
  }, 60_000);

  it('a pack extended through A just before B ends it stays extended, and its keys keep working', async () => {
    // B first, so it holds the chores (it ends packs); it hears A's changes only when it asks
    // (notifications dropped, a catch-up read every 25 s): the extension reaches it late.
    const b = await nodes.start(db.url, { OB_PROXY_TEST_NO_NOTIFY: '1', OB_PROXY_STORE_CATCHUP_MS: '25000' });
    const a = await nodes.start(db.url, {});
    expect((await b.api.status()).storeSync?.holdsChores).toBe(true);

    const endsAt = new Date(Date.now() + 5000).toISOString();
    await b.api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: sim.url, packEndsAt: endsAt });
    await b.api.ready('gpu-1', { wait: true });
    const key = await b.api.createKey('gpu-1', 'team');
    const later = new Date(Date.now() + 3_600_000).toISOString();
    expect((await a.api.extend('gpu-1', later)).packEndsAt).toBe(later);
    await eventually(async () => (await modelsStatus(a, key.secret)) === 200, 'A serves the key');

    // Past the old pack end, B's timer has acted once B serves the key again (it heard the
    // extension) or A refuses it (it heard the pack end). Until then B refuses it from its memory.
    await eventually(
      async () =>
        Date.now() > Date.parse(endsAt) &&
        ((await modelsStatus(b, key.secret)) === 200 || (await modelsStatus(a, key.secret)) !== 200),
      "B's pack timer to act",
      15_000,
    );
    expect([await modelsStatus(a, key.secret), await modelsStatus(b, key.secret)]).toEqual([200, 200]);
    for (const n of [a, b]) {
      const inst = await n.api.getInstance('gpu-1');
      expect([inst.state, inst.packEndsAt]).toEqual(['ready', later]);
    }
    const revoked = (await a.api.listKeys('gpu-1')).filter((k) => k.status !== 'active');
    expect(revoked).toEqual([]);
  }, 60_000);
});
