import type { DeadlineNode } from './deadlines.js';

/** What a passed deadline or silence ends: the relay carrying the exchange now. */
export interface WatchedRelay {
  deadlinePassed(): void;
  silencePassed(): void;
}

/**
 * An exchange's place in the response deadlines (deadlines.ts) and its watch on the model
 * server's silence: a part the exchange owns (accounting.ts), not its relay. A resend hands the
 * exchange to another relay, which takes the watch over and starts its own deadline on it; the
 * relay only bumps `heard` at each sign of life and sets `quietMs`.
 */
export class UpstreamWatch implements DeadlineNode {
  dueAt = 0;
  prevDue: DeadlineNode | null = null;
  nextDue: DeadlineNode | null = null;
  heard = 0;
  quietMs = 0;
  heardSeen = 0;
  quietSince = 0;
  relay: WatchedRelay | null = null;

  deadlinePassed(): void {
    this.relay?.deadlinePassed();
  }

  silencePassed(): void {
    this.relay?.silencePassed();
  }
}
