import { defineConfig } from 'vitest/config';

/** `npm run test:dist`: the package as users get it (packs, installs from the registry: minutes), and the single binary. */
export default defineConfig({
  test: {
    include: ['test/package/**/*.test.ts'],
    allowOnly: false,
    // The run's PostgreSQL server (or OB_PROXY_TEST_PG's): test/helpers/postgres.ts.
    globalSetup: ['test/helpers/pg-global-setup.ts'],
    testTimeout: 600_000,
    hookTimeout: 600_000,
    pool: 'forks',
    maxWorkers: 1,
  },
});
