/**
 * The set-up most end-to-end tests stand on: a real `ob-proxy simulate`, a real `ob-proxy serve`
 * on a fresh home, and instances on the simulator made ready through the real CLI, each with its
 * default key.
 */
import { afterAll, beforeAll } from 'vitest';
import { type ServeProcess, type SimProcess, cliJson, startServe, startSimulate, tmpHome } from './processes.js';
import { MODEL } from './store-home.js';

export interface DaemonAndSimOptions {
  /** What the simulator serves; the instances are of the first. Default: MODEL. */
  models?: string[];
  simArgs?: string[];
  serveArgs?: string[];
  /** The daemon's environment, over the test's. */
  env?: Record<string, string>;
  /** Instances added on the simulator and made ready, in order. Default: gpu-1; none with []. */
  instances?: string[];
}

export interface DefaultKey {
  id: string;
  secret: string;
}

export interface DaemonAndSim {
  sim: SimProcess;
  serve: ServeProcess;
  home: string;
  /** Each ready instance's default key, by instance id. */
  keys: Record<string, DefaultKey>;
  /** The first instance's default key's secret ('' with no instances). */
  key: string;
  /** Resumes the daemon (a test may have left it stopped), then stops it and the simulator. */
  stop(): Promise<void>;
}

async function stopBoth(serve: ServeProcess | undefined, sim: SimProcess | undefined): Promise<void> {
  serve?.proc.kill('SIGCONT');
  await serve?.stop();
  await sim?.stop();
}

export async function startDaemonAndSim(opts: DaemonAndSimOptions = {}): Promise<DaemonAndSim> {
  const models = opts.models ?? [MODEL];
  const home = await tmpHome();
  const sim = await startSimulate(models, opts.simArgs);
  let serve: ServeProcess | undefined;
  try {
    serve = await startServe(home, opts.serveArgs, opts.env);
    const keys: Record<string, DefaultKey> = {};
    for (const id of opts.instances ?? ['gpu-1']) {
      await cliJson(['instances', 'add', id, '--model', models[0]!, '--endpoint', sim.url], home);
      keys[id] = (await cliJson<{ defaultKey: DefaultKey }>(['instances', 'ready', id], home)).defaultKey;
    }
    const first = Object.values(keys)[0];
    const started = serve;
    return { sim, serve, home, keys, key: first?.secret ?? '', stop: () => stopBoth(started, sim) };
  } catch (err) {
    // A start that failed half way leaves no process behind to hold the test run open.
    await stopBoth(serve, sim);
    throw err;
  }
}

/**
 * startDaemonAndSim for a describe block (or a file): started before its tests, stopped after
 * them. Read the fields inside the tests: they are set once the hook has run.
 */
export function useDaemonAndSim(opts: DaemonAndSimOptions = {}): DaemonAndSim {
  const d = {} as DaemonAndSim;
  beforeAll(async () => {
    Object.assign(d, await startDaemonAndSim(opts));
  });
  afterAll(async () => {
    await d.stop?.();
  });
  return d;
}
