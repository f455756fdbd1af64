import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * The longest files, longest first (docs/architecture.md, "Where the time goes"). Vitest orders
 * files by their last run's durations when it has them, else by size, largest first: in a fresh
 * checkout, as in CI, a short file that waits a long time would start last and run alone at the
 * end on one of the two workers. These go first; the rest keep Vitest's order.
 */
const LONGEST_FIRST = [
  'test/reliability/crash-restart.test.ts',
  'test/reliability/scale-out.test.ts',
  'test/bench/bench-smoke.test.ts',
  'test/reliability/cluster-limits.test.ts',
  'test/e2e/store-backup.test.ts',
  'test/e2e/health-probes.test.ts',
  'test/e2e/lifecycle-cli.test.ts',
  'test/reliability/revocation-timings.test.ts',
  'test/e2e/limits.test.ts',
  'test/regressions/held-body-served-after-revocation.test.ts',
  'test/e2e/readme.test.ts',
  'test/regressions/stream-outlives-revocation.test.ts',
];

class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (f: TestSpecification): number => {
      const at = LONGEST_FIRST.findIndex((path) => f.moduleId.endsWith(path));
      return at === -1 ? LONGEST_FIRST.length : at;
    };
    return (await super.sort(files)).sort((a, b) => rank(a) - rank(b));
  }
}

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'test/**/*.test.tsx'],
    exclude: ['test/soak/**', 'test/package/**', 'node_modules/**', 'dist/**'],
    allowOnly: false,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Two cores: real daemons and simulators per file; too many files at once starve each other.
    maxWorkers: 2,
    sequence: { sequencer: LongestFirst },
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
