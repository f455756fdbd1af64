import { defineConfig } from 'vitest/config';

/** `npm run soak`: the long load and fault runs (minutes), kept out of `npm test`. */
export default defineConfig({
  test: {
    include: ['test/soak/**/*.test.ts'],
    allowOnly: false,
    testTimeout: 30 * 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // One file at a time: each drives the machine as hard as it can.
    maxWorkers: 1,
  },
});
