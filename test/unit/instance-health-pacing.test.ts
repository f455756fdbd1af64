/**
 * Health probes spread over their round (docs/operations.md, "Health probes"): at most `rate`
 * started a second and `concurrency` waiting at once, so their cost per second does not grow with
 * the number of instances; the next round begins an interval after the last began, or when a
 * longer round ends. Time is the test's: the waits go through an injected sleep that moves a clock.
 */
import { describe, expect, it } from 'vitest';
import type { Instance } from '../../src/domain/instance.js';
import { InstanceHealth, WALK_SLICE } from '../../src/services/instance-health.js';
import type { ProbeResult } from '../../src/upstream/model-probe.js';

function instances(n: number): Map<string, Instance> {
  const out = new Map<string, Instance>();
  for (let i = 0; i < n; i++)
    out.set(`i${i}`, {
      id: `i${i}`,
      deployment: `d${i}`,
      model: 'gemma4:26b',
      aliases: [],
      endpoint: `http://10.0.0.${i % 250}:11434`,
      state: i % 10 === 9 ? 'pending' : 'ready',
      packEndsAt: null,
      createdAt: '2026-11-23T12:00:00.000Z',
      updatedAt: '2026-11-23T12:00:00.000Z',
    });
  return out;
}

/** A world where probes answer when the test says, and sleeping moves the clock. */
function world(n: number, rate: number, concurrency: number) {
  const all = instances(n);
  let now = 0;
  const sleeps: number[] = [];
  const pending: { id: string; answer: () => void }[] = [];
  let waiting = 0;
  let mostWaiting = 0;
  const started: { id: string; at: number }[] = [];
  const health = new InstanceHealth({
    clock: { now: () => now },
    instances: () => all.values(),
    instance: (id) => all.get(id),
    token: () => undefined,
    rate,
    concurrency,
    sleep: async (ms) => {
      sleeps.push(ms);
      now += ms;
      // Every probe waiting answers while time passes, but one: the cap is what holds the rest.
      for (const p of pending.splice(0, Math.max(pending.length - 1, 0))) p.answer();
    },
    probe: (endpoint) =>
      new Promise<ProbeResult>((resolve) => {
        const id = [...all.values()].find((i) => i.endpoint === endpoint)!.id;
        started.push({ id, at: now });
        waiting += 1;
        mostWaiting = Math.max(mostWaiting, waiting);
        pending.push({
          id,
          answer: () => {
            waiting -= 1;
            resolve({ status: 'reachable', error: null });
          },
        });
      }),
  });
  const flush = (): void => {
    for (const p of pending.splice(0)) p.answer();
  };
  return { health, all, sleeps, started, flush, most: () => mostWaiting, now: () => now };
}

describe('a round of probes is paced', () => {
  it('rate 10/s, 3 at once: every ready instance once, starts 100 ms apart, never more than 3 waiting', async () => {
    const w = world(20, 10, 3);
    const round = w.health.probeAll();
    // Let the last probes answer once the round has started them all.
    const answerRest = setInterval(w.flush, 1);
    await round;
    clearInterval(answerRest);
    const ready = [...w.all.values()].filter((i) => i.state === 'ready').map((i) => i.id);
    expect(w.started.map((s) => s.id).sort()).toEqual([...ready].sort());
    expect(w.sleeps.every((ms) => ms === 100)).toBe(true);
    expect(w.sleeps).toHaveLength(ready.length - 1);
    expect(w.most()).toBeLessThanOrEqual(3);
    // 18 ready instances at 10 a second: the round spread over 1.7 s, not a burst.
    expect(w.started.at(-1)!.at - w.started[0]!.at).toBe(1700);
    for (const id of ready) expect(w.health.view(w.all.get(id)!)?.status).toBe('reachable');
  });

  it('a round longer than the interval: the next begins when it ends; a shorter one waits the rest', async () => {
    const w = world(5, 1, 16);
    const answerAll = setInterval(w.flush, 1);
    w.health.start(10_000);
    // Round 1: 5 probes 1 s apart (4 s), then 6 s of rest; round 2 starts at 10 s.
    await expect.poll(() => w.started.length, { timeout: 5000 }).toBeGreaterThanOrEqual(9);
    w.health.stop();
    clearInterval(answerAll);
    expect(w.sleeps.slice(0, 5)).toEqual([1000, 1000, 1000, 1000, 6000]);
    expect(w.started[5]!.at).toBe(10_000);
  });
});

describe("a round's start over many instances", () => {
  it('gives other work a turn while it walks them, and still probes every ready one', async () => {
    const all = instances(WALK_SLICE * 2 + 1);
    const probed: string[] = [];
    let turned = false;
    let turnedBeforeFirstProbe: boolean | null = null;
    const health = new InstanceHealth({
      clock: { now: () => 0 },
      instances: () => all.values(),
      instance: (id) => all.get(id),
      token: () => undefined,
      probe: async (endpoint) => {
        turnedBeforeFirstProbe ??= turned;
        probed.push(endpoint);
        return { status: 'reachable', error: null };
      },
    });
    setImmediate(() => (turned = true));
    await health.probeAll();
    expect(turnedBeforeFirstProbe).toBe(true);
    expect(probed).toHaveLength([...all.values()].filter((i) => i.state === 'ready').length);
  });
});
