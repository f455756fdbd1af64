import { type TestProjectInlineConfiguration, defineConfig } from 'vitest/config';

/**
 * Two tiers, told apart by folder. The folders below hold the tests that start real processes:
 * the daemon, the CLI and the simulator as `ob-proxy` binaries, the console in a pseudo-terminal,
 * PostgreSQL servers to kill, real model servers, the bench; `npm run test:e2e` runs them (project
 * `e2e`). Every other test file runs in process, in `npm test` (projects `fast*`): the daemon from
 * `buildDaemon`, the simulator from `buildSimulator`, the CLI as `runCli`, the console's screens on
 * a fake daemon; test/helpers/in-process-only.ts fails a test there that starts Node as a child.
 * `npx vitest run <file>` runs a file of either tier.
 */
const E2E_DIRS = ['test/e2e', 'test/reliability', 'test/bench', 'test/conformance'];

/**
 * Fast-tier files that need a process of their own:
 * - colour.test.tsx sets FORCE_COLOR before Ink's chalk is first imported, so that Ink would
 *   colour what the console let through;
 * - the files that count the process's pending timers (`vi.getTimerCount()`): in a shared
 *   worker, a timer that code an earlier file left running re-arms while the fake clock is
 *   installed is counted as theirs.
 */
const OWN_PROCESS = [
  'test/console/colour.test.tsx',
  'test/unit/deadlines.test.ts',
  'test/unit/pack-timer.test.ts',
  'test/unit/shutdown.test.ts',
];

const TESTS = ['**/*.test.ts', '**/*.test.tsx'];
const NEVER = ['test/soak/**', 'test/package/**', 'node_modules/**', 'dist/**'];

const shared: TestProjectInlineConfiguration['test'] = {
  allowOnly: false,
  // The run's PostgreSQL server (or OB_PROXY_TEST_PG's): test/helpers/postgres.ts.
  globalSetup: ['test/helpers/pg-global-setup.ts'],
  testTimeout: 30_000,
  // A set-up starts daemons and simulators; startServe allows one 60 s to listen on a busy machine.
  hookTimeout: 60_000,
  pool: 'forks',
};

export default defineConfig({
  test: {
    // Two cores: real daemons and simulators per file; too many files at once starve each other.
    maxWorkers: 2,
    // In-process code only: the daemons and CLIs the end-to-end suites spawn are not instrumented,
    // so this figure is what the in-process code alone covers (docs/architecture.md).
    coverage: {
      provider: 'v8',
      include: ['src/**', 'daemon/**', 'cli/**', 'bin/**'],
      reporter: ['text-summary', 'json-summary'],
      reportsDirectory: 'coverage',
    },
    projects: [
      {
        test: {
          ...shared,
          name: 'fast',
          include: TESTS.map((t) => `test/${t}`),
          exclude: [...E2E_DIRS.map((dir) => `${dir}/**`), ...NEVER, ...OWN_PROCESS],
          setupFiles: ['test/helpers/in-process-only.ts'],
          // Files share a worker and its modules: a file's start is a module run, not a fork and
          // a fresh import of Fastify, undici and Ink (about half of the tier's CPU).
          isolate: false,
        },
      },
      {
        test: {
          ...shared,
          name: 'fast-own-process',
          include: OWN_PROCESS,
          setupFiles: ['test/helpers/in-process-only.ts'],
        },
      },
      {
        test: {
          ...shared,
          name: 'e2e',
          include: E2E_DIRS.flatMap((dir) => TESTS.map((t) => `${dir}/${t}`)),
          exclude: NEVER,
        },
      },
    ],
  },
});
