import { type Clock, iso } from '../clock.js';
import type { Instance } from '../domain/instance.js';
import type { ProbeResult, ProbeStatus } from '../upstream/model-probe.js';

/** What `instances list`, the console and the metrics show of an instance's model server. */
export interface HealthView {
  status: ProbeStatus;
  checkedAt: string;
  /** What the last probe found wrong, naming the endpoint; null when reachable. */
  error: string | null;
}

interface Entry extends HealthView {
  /** The result holds for this deployment at this endpoint only: a move elsewhere forgets it. */
  deployment: string;
  endpoint: string;
}

export interface InstanceHealthDeps {
  clock: Clock;
  instances(): Iterable<Instance>;
  instance(id: string): Instance | undefined;
  probe(endpoint: string, model: string, token: string | undefined): Promise<ProbeResult>;
  /** The instance's upstream token: never a client's key. */
  token(instanceId: string): string | undefined;
  /** A probe's status differs from the one before (or is the first): for the log. */
  changed?(instance: Instance, now: HealthView, before: HealthView | null): void;
  /** Probes started per second at most, and waiting at once at most (--probe-rate, --probe-concurrency). */
  rate?: number;
  concurrency?: number;
  /** Resolves after `ms` (a timer, unref'd; tests pass their own). */
  sleep?(ms: number): Promise<void>;
}

/**
 * Instances a round's start looks at between two turns of the event loop: its two walks over every
 * instance held requests for tens of milliseconds at 500,000 instances.
 */
export const WALK_SLICE = 5_000;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

const unrefSleep = (ms: number): Promise<void> =>
  new Promise((resolve) => {
    setTimeout(resolve, ms).unref();
  });

/**
 * The last probe of each ready instance, in memory, refreshed off the request path every
 * interval. A round's probes are spread out, at most `rate` started a second and `concurrency`
 * waiting at once, so their cost per second stays flat however many instances there are: a round
 * of N instances takes at least N / rate seconds, and the next starts no sooner than the interval
 * after it began. A probe still running is not started twice, so a server that hangs costs one
 * probe per instance at a time, bounded by the probe's own timeout.
 */
export class InstanceHealth {
  private readonly entries = new Map<string, Entry>();
  private readonly probing = new Set<string>();
  private stopped = false;

  constructor(private readonly deps: InstanceHealthDeps) {}

  /**
   * Probes one instance's endpoint now, as `instances ready` does before the move (with the
   * token it is about to use, which may not be loaded yet).
   */
  async check(
    instance: Pick<Instance, 'id' | 'model'>,
    endpoint: string,
    token = this.deps.token(instance.id),
  ): Promise<HealthView> {
    const result = await this.deps.probe(endpoint, instance.model, token);
    const view: HealthView = { status: result.status, checkedAt: iso(this.deps.clock.now()), error: result.error };
    return view;
  }

  /** Keeps a result for the instance as it is now. */
  record(instance: Instance, endpoint: string, view: HealthView): void {
    const before = this.view(instance);
    this.entries.set(instance.id, { ...view, deployment: instance.deployment, endpoint });
    if (before === null || before.status !== view.status) this.deps.changed?.(instance, view, before);
  }

  /** The last probe of a ready instance at its current endpoint; null if none applies. */
  view(instance: Instance): HealthView | null {
    const e = this.entries.get(instance.id);
    if (
      e === undefined ||
      instance.state !== 'ready' ||
      e.deployment !== instance.deployment ||
      e.endpoint !== instance.endpoint
    )
      return null;
    return { status: e.status, checkedAt: e.checkedAt, error: e.error };
  }

  /**
   * Every ready instance's current status, for the metrics gauge; null for an instance with none
   * (not ready, or not probed yet), so that a walk of them in pieces counts it as work done.
   */
  *statuses(): Iterable<{ instance: string; status: ProbeStatus } | null> {
    for (const i of this.deps.instances()) {
      const v = this.view(i);
      yield v === null ? null : { instance: i.id, status: v.status };
    }
  }

  /** Probes every ready instance once, paced; resolves when all have answered (each is time-bounded). */
  async probeAll(): Promise<void> {
    // A Map's iterator holds across turns: an entry deleted meanwhile is skipped, one added is seen.
    let walked = 0;
    for (const id of this.entries.keys()) {
      if (this.deps.instance(id) === undefined) this.entries.delete(id);
      if (++walked % WALK_SLICE === 0) await nextTurn();
    }
    const rate = this.deps.rate ?? Infinity;
    const concurrency = this.deps.concurrency ?? Infinity;
    const sleep = this.deps.sleep ?? unrefSleep;
    const gapMs = Number.isFinite(rate) ? 1000 / rate : 0;
    // The ids first, a slice a turn: an instance added once they are taken waits for the next
    // round, and each is looked up again before its probe.
    const ids: string[] = [];
    for (const inst of this.deps.instances()) {
      if (inst.state === 'ready' && inst.endpoint !== null) ids.push(inst.id);
      if (++walked % WALK_SLICE === 0) await nextTurn();
    }
    const running = new Set<Promise<void>>();
    for (let i = 0; i < ids.length && !this.stopped; i++) {
      if (i > 0 && gapMs > 0) await sleep(gapMs);
      while (running.size >= concurrency) await Promise.race(running);
      const inst = this.deps.instance(ids[i] as string);
      const endpoint = inst?.endpoint ?? null;
      if (inst === undefined || inst.state !== 'ready' || endpoint === null || this.probing.has(inst.id)) continue;
      this.probing.add(inst.id);
      const one = this.check(inst, endpoint)
        .then((view) => {
          // The instance may have moved while the probe ran: keep the result only if it still applies.
          const now = this.deps.instance(inst.id);
          if (
            !this.stopped &&
            now !== undefined &&
            now.state === 'ready' &&
            now.deployment === inst.deployment &&
            now.endpoint === endpoint
          )
            this.record(now, endpoint, view);
        })
        .finally(() => {
          this.probing.delete(inst.id);
          running.delete(one);
        });
      running.add(one);
    }
    await Promise.all(running);
  }

  /**
   * Probes at once (instances ready before a restart show their health without waiting a
   * period), then a round every `intervalMs` (or as soon as a longer round ends) until stop();
   * 0 keeps periodic probes off.
   */
  start(intervalMs: number): void {
    if (intervalMs <= 0) return;
    const sleep = this.deps.sleep ?? unrefSleep;
    const loop = async (): Promise<void> => {
      while (!this.stopped) {
        const began = this.deps.clock.now();
        await this.probeAll();
        const rest = intervalMs - (this.deps.clock.now() - began);
        await sleep(Math.max(rest, 0));
      }
    };
    void loop();
  }

  stop(): void {
    this.stopped = true;
  }
}
