import { iso } from '../clock.js';

/** What the request path adds to, per instance: plain fields, no allocation per request. */
export interface LiveCounter {
  requests: number;
  /** Completion tokens, counted when an exchange ends (a stream's all at once). */
  tokens: number;
  errors: number;
  openStreams: number;
  /**
   * Completion tokens per millisecond a request of this instance is with its model server, from
   * its answers so far (0 before the first): what a plain answer its client left is charged by
   * (prompt-estimate.ts).
   */
  tokensPerMs: number;
}

/** One instance's last samples, oldest first; each sample covers `sampleMs[i]` milliseconds. */
export interface InstanceLiveView {
  instance: string;
  requestsPerSecond: number;
  tokensPerSecond: number;
  errorsPerSecond: number;
  openStreams: number;
  /** Counts per sample (not rates), so they add up to what happened. */
  requests: number[];
  tokens: number[];
  errors: number[];
  /** Open streams at each sample. */
  streams: number[];
  sampleMs: number[];
}

export interface LiveStatsView {
  at: string;
  instances: InstanceLiveView[];
}

interface Series {
  counter: LiveCounter;
  /** The counter's values at the last sample. */
  seen: { requests: number; tokens: number; errors: number };
  requests: number[];
  tokens: number[];
  errors: number[];
  streams: number[];
  sampleMs: number[];
}

/**
 * Live figures per instance for the console: the data plane bumps counters in memory; a timer
 * samples them (once a second) into short rings, and the management API serves the rings. The
 * request path never computes a rate or touches a ring.
 */
export class LiveStats {
  private readonly series = new Map<string, Series>();
  private lastSample: number;

  constructor(
    nowMs: number,
    private readonly slots = 60,
  ) {
    this.lastSample = nowMs;
  }

  /** The counter the data plane adds to for `instance`. */
  counter(instance: string): LiveCounter {
    let s = this.series.get(instance);
    if (s === undefined) {
      s = {
        counter: { requests: 0, tokens: 0, errors: 0, openStreams: 0, tokensPerMs: 0 },
        seen: { requests: 0, tokens: 0, errors: 0 },
        requests: [],
        tokens: [],
        errors: [],
        streams: [],
        sampleMs: [],
      };
      this.series.set(instance, s);
    }
    return s.counter;
  }

  /** Closes a sample: what each counter gained since the last one. `exists` prunes forgotten instances. */
  sample(nowMs: number, exists: (instance: string) => boolean): void {
    const ms = Math.max(1, nowMs - this.lastSample);
    this.lastSample = nowMs;
    for (const [id, s] of this.series) {
      const c = s.counter;
      if (!exists(id) && c.openStreams === 0) {
        this.series.delete(id);
        continue;
      }
      push(s.requests, c.requests - s.seen.requests, this.slots);
      push(s.tokens, c.tokens - s.seen.tokens, this.slots);
      push(s.errors, c.errors - s.seen.errors, this.slots);
      push(s.streams, c.openStreams, this.slots);
      push(s.sampleMs, ms, this.slots);
      s.seen = { requests: c.requests, tokens: c.tokens, errors: c.errors };
    }
  }

  view(nowMs: number): LiveStatsView {
    const instances = [...this.series]
      .map(([instance, s]): InstanceLiveView => {
        const last = s.sampleMs.length - 1;
        const perSecond = (a: number[]): number =>
          last < 0 ? 0 : ((a[last] ?? 0) * 1000) / (s.sampleMs[last] ?? 1000);
        return {
          instance,
          requestsPerSecond: perSecond(s.requests),
          tokensPerSecond: perSecond(s.tokens),
          errorsPerSecond: perSecond(s.errors),
          openStreams: s.counter.openStreams,
          requests: [...s.requests],
          tokens: [...s.tokens],
          errors: [...s.errors],
          streams: [...s.streams],
          sampleMs: [...s.sampleMs],
        };
      })
      .sort((a, b) => a.instance.localeCompare(b.instance));
    return { at: iso(nowMs), instances };
  }
}

function push(ring: number[], value: number, slots: number): void {
  ring.push(value);
  if (ring.length > slots) ring.shift();
}
