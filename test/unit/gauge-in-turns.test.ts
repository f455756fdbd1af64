import { Gauge, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ROWS_A_TURN, collectInTurns } from '../../daemon/metrics/gauge-in-turns.js';

const SERIES = ROWS_A_TURN * 3 + 7;

function gaugeOf(rows: () => Iterable<[{ instance?: string }, number]>): Registry {
  const registry = new Registry();
  new Gauge({ name: 'g', help: 'h', labelNames: ['instance'], registers: [registry], collect: collectInTurns(rows) });
  return registry;
}

function* instances(n: number, value: number): Iterable<[{ instance: string }, number]> {
  for (let i = 0; i < n; i++) yield [{ instance: `i${i}` }, value];
}

describe('a gauge filled over several turns of the event loop', () => {
  it('lets other work run while it fills, and every series is there once it is read', async () => {
    const registry = gaugeOf(() => instances(SERIES, 1));
    let turns = 0;
    const ticker = setInterval(() => turns++, 0);
    const text = await registry.getSingleMetricAsString('g');
    clearInterval(ticker);
    const samples = text.split('\n').filter((l) => l.startsWith('g{'));
    expect(samples).toHaveLength(SERIES);
    expect(samples[0]).toBe('g{instance="i0"} 1');
    expect(samples.at(-1)).toBe(`g{instance="i${SERIES - 1}"} 1`);
    expect(turns).toBeGreaterThan(0);
  });

  it('two scrapes at once each read a whole gauge, and a series gone from the rows goes', async () => {
    let calls = 0;
    // The first collection reads SERIES rows, the second two: had the second reset the gauge
    // while the first filled it, the first would read a mix.
    const registry = gaugeOf(() => (++calls === 1 ? instances(SERIES, 1) : instances(2, 5)));
    const first = registry.getSingleMetricAsString('g');
    // The second scrape starts while the first sets its series (after reading them, 3 turns).
    for (let i = 0; i < 4; i++) await new Promise((resolve) => setImmediate(resolve));
    const second = registry.getSingleMetricAsString('g');
    const [a, b] = await Promise.all([first, second]);
    expect(a.split('\n').filter((l) => l.startsWith('g{'))).toHaveLength(SERIES);
    expect(b.split('\n').filter((l) => l.startsWith('g{'))).toEqual(['g{instance="i0"} 5', 'g{instance="i1"} 5']);
  });
});
