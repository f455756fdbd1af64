import { defineConfig } from 'vitest/config';

/** `npm run test:dist`: the package as users get it (packs, installs from the registry: minutes), and the single binary. */
export default defineConfig({
  test: {
    include: ['test/package/**/*.test.ts'],
    allowOnly: false,
    testTimeout: 600_000,
    hookTimeout: 600_000,
    pool: 'forks',
    maxWorkers: 1,
  },
});
