import { expect } from 'vitest';
import { postChat } from './chat.js';
import { useDaemonAndSim } from './daemon-and-sim.js';
import { type CliResult, type ServeProcess, type SimProcess, cliJson, runCli } from './processes.js';
import { MODEL, chat } from './store-home.js';

export interface ServeFixture {
  readonly sim: SimProcess;
  readonly serve: ServeProcess;
  readonly home: string;
}

/**
 * A test file's daemon on a fresh home, and a simulator of `models` answering in one chunk, with
 * no instance yet: useDaemonAndSim's hooks (the daemon resumed before it is stopped, should a
 * test have left it stopped).
 */
export function serveWithSimulator(models: string[] = [MODEL]): ServeFixture {
  return useDaemonAndSim({ models, simArgs: ['--chunks', '1'], instances: [] });
}

/** CLI_TIMEOUT for commands sent to a stopped daemon: they give up after it, with exit 3. */
export const STOPPED_CLI_TIMEOUT = '0.5';

/**
 * Runs the CLI, `args` one command after another, while the daemon is stopped (SIGSTOP, as Ctrl-Z
 * in its terminal does): each gives up after STOPPED_CLI_TIMEOUT. The daemon runs again after,
 * whatever happened, and goes on with what it was sent.
 */
export async function runCliWhileStopped(f: ServeFixture, ...commands: string[][]): Promise<CliResult[]> {
  f.serve.proc.kill('SIGSTOP');
  try {
    const results: CliResult[] = [];
    for (const args of commands)
      results.push(await runCli(args, { home: f.home, env: { OB_PROXY_CLI_TIMEOUT: STOPPED_CLI_TIMEOUT } }));
    return results;
  } finally {
    f.serve.proc.kill('SIGCONT');
  }
}

/** The key's secret, kept unrevealed, is shown by `keys reveal` once: it works, and a second reveal is refused. */
export async function expectRevealedOnce(f: ServeFixture, keyId: string): Promise<void> {
  const revealed = await cliJson<{ id: string; secret: string }>(['keys', 'reveal', keyId], f.home);
  expect(revealed.id).toBe(keyId);
  expect((await postChat(f.serve.baseUrl, revealed.secret, chat())).status).toBe(200);
  const again = await runCli(['keys', 'reveal', keyId], { home: f.home });
  expect(again.code).toBe(1);
  expect(again.stderr).toMatch(/cannot be shown: it was already displayed/);
}
