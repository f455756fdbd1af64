/**
 * What a PostgreSQL cluster test stands on: a simulator serving MODEL, a fresh database with an
 * admin connection of the test's own, and `ob-proxy serve` daemons on that database. Started in
 * `beforeAll` and stopped in `afterAll` (daemons first, then the admin connection, the database
 * and the simulator); `twoDaemons` gives the usual pair, A and B, with instance gpu-1 ready, and
 * `pair` the same two daemons with no instance yet. `usePostgresRig` registers those hooks.
 */
import { afterAll, beforeAll } from 'vitest';
import pg from 'pg';
import { type SimProcess, startSimulate } from './processes.js';
import { type TestDatabase, freshDatabase } from './postgres.js';
import { type ServeNode, ServeNodes } from './serve-nodes.js';

export const MODEL = 'gemma4:26b';

export interface RigOptions {
  /** What the simulator serves. Default: MODEL. */
  models?: string[];
  /** Default: one chunk an answer. */
  simArgs?: string[];
}

export class PostgresRig {
  /** Every daemon started on the database: stopped with the rig. */
  readonly nodes = new ServeNodes();
  private simulator: SimProcess | undefined;
  private database: TestDatabase | undefined;
  private adminClient: pg.Client | undefined;

  constructor(private readonly opts: RigOptions = {}) {}

  async start(): Promise<void> {
    this.simulator = await startSimulate(this.opts.models ?? [MODEL], this.opts.simArgs ?? ['--chunks', '1']);
    this.database = await freshDatabase();
    this.adminClient = new pg.Client({ connectionString: this.database.url });
    await this.adminClient.connect();
  }

  get sim(): SimProcess {
    return started(this.simulator);
  }

  get db(): TestDatabase {
    return started(this.database);
  }

  /** A connection of the test's own, to read and change the tables behind the daemons. */
  get admin(): pg.Client {
    return started(this.adminClient);
  }

  /** Daemons A and B on the database, B started second, each with `args` after `--store`. */
  async pair(env: Record<string, string> = {}, args: string[] = []): Promise<{ a: ServeNode; b: ServeNode }> {
    const a = await this.nodes.start(this.db.url, env, args);
    const b = await this.nodes.start(this.db.url, env, args);
    return { a, b };
  }

  /** The pair, and gpu-1 added through A and ready. */
  async twoDaemons(env: Record<string, string> = {}): Promise<{ a: ServeNode; b: ServeNode }> {
    const { a, b } = await this.pair(env);
    await a.api.addInstance({ id: 'gpu-1', model: MODEL, endpoint: this.sim.url });
    await a.api.ready('gpu-1', { wait: true });
    return { a, b };
  }

  async stop(): Promise<void> {
    await this.nodes.stopAll();
    await this.adminClient?.end();
    await this.database?.drop();
    await this.simulator?.stop();
  }
}

/** A rig for a describe block (or a file): started before its tests, stopped after them. */
export function usePostgresRig(opts: RigOptions = {}): PostgresRig {
  const rig = new PostgresRig(opts);
  beforeAll(() => rig.start());
  afterAll(() => rig.stop(), 60_000);
  return rig;
}

function started<T>(part: T | undefined): T {
  if (part === undefined) throw new Error('The PostgreSQL rig is not started: call start() in beforeAll.');
  return part;
}
