import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'test/**/*.test.tsx'],
    exclude: ['test/soak/**', 'test/package/**', 'node_modules/**', 'dist/**'],
    allowOnly: false,
    // The run's PostgreSQL server (or OB_PROXY_TEST_PG's): test/helpers/postgres.ts.
    globalSetup: ['test/helpers/pg-global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two cores: real daemons and simulators per file; too many files at once starve each other.
    maxWorkers: 2,
    // In-process code only: the daemons and CLIs the end-to-end suites spawn are not instrumented,
    // so this figure is what the fast tests alone cover (docs/architecture.md).
    coverage: {
      provider: 'v8',
      include: ['src/**', 'daemon/**', 'cli/**', 'bin/**'],
      reporter: ['text-summary', 'json-summary'],
      reportsDirectory: 'coverage',
    },
  },
});
