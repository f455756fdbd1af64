import type { Clock } from '../src/clock.js';
import type { LiveStats } from '../src/services/live-stats.js';

/** How often the console's live figures are sampled. */
const SAMPLE_MS = 1000;

/**
 * The console's live view: rates from the counters the request path bumps in memory, sampled
 * here, off the request path; `known` tells an instance still in the registry from one removed.
 */
export class LiveSampler {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly live: Pick<LiveStats, 'sample'>,
    private readonly clock: Clock,
    private readonly known: (instanceId: string) => boolean,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.live.sample(this.clock.now(), this.known), SAMPLE_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
