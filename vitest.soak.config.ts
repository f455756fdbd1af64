import { defineConfig } from 'vitest/config';

/** `npm run soak`: the long load and fault runs (minutes), kept out of `npm test`. */
export default defineConfig({
  test: {
    include: ['test/soak/**/*.test.ts'],
    allowOnly: false,
    // The run's PostgreSQL server (or OB_PROXY_TEST_PG's): test/helpers/postgres.ts.
    globalSetup: ['test/helpers/pg-global-setup.ts'],
    testTimeout: 30 * 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // One file at a time: each drives the machine as hard as it can.
    maxWorkers: 1,
  },
});
