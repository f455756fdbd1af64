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
import { type Server, type Socket, createServer, connect } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type SimProcess, eventually, startSimulate } from '../../helpers/processes.js';
import { type TestDatabase, freshDatabase } from '../../helpers/postgres.js';
import { ServeNodes, modelsStatus } from '../../helpers/serve-nodes.js';

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
