import { describe, expect, it } from 'vitest';
import { SERIES_A_TURN, gaugeText } from '../../daemon/metrics/text-gauge.js';
import { turnsDuring } from '../helpers/event-loop-turns.js';

describe('a per-instance gauge written as Prometheus text by the daemon', () => {
  it('writes HELP, TYPE and a line a series, label values quoted as the text format says', async () => {
    const text = await gaugeText({
      name: 'g',
      help: 'Help with a \\ and a\nnewline.',
      *series() {
        yield [{ instance: 'a', status: 'active' }, 2];
        yield [{ instance: 'say "hi"\\\n', status: 'revoked' }, 0];
      },
    });
    expect(text).toBe(
      [
        '# HELP g Help with a \\\\ and a\\nnewline.',
        '# TYPE g gauge',
        'g{instance="a",status="active"} 2',
        'g{instance="say \\"hi\\"\\\\\\n",status="revoked"} 0',
        '',
      ].join('\n'),
    );
  });

  it('lets other work run between pieces of many series, and writes them all', async () => {
    const count = SERIES_A_TURN * 3 + 1;
    const ticks = turnsDuring();
    const text = await gaugeText({
      name: 'g',
      help: 'h',
      *series() {
        for (let i = 0; i < count; i++) yield [{ instance: `i${i}` }, i];
      },
    });
    const turns = ticks.stop();
    const lines = text.split('\n').filter((l) => l.startsWith('g{'));
    expect(lines).toHaveLength(count);
    expect(lines.at(-1)).toBe(`g{instance="i${count - 1}"} ${count - 1}`);
    // At least one turn between each two pieces of SERIES_A_TURN series.
    expect(turns).toBeGreaterThanOrEqual(3);
  });
});

describe('a per-instance gauge of things that mostly make no series', () => {
  it('counts each thing read as work, so a walk that writes nothing still lets other work run', async () => {
    const count = SERIES_A_TURN * 3 + 1;
    const ticks = turnsDuring();
    const text = await gaugeText({
      name: 'g',
      help: 'h',
      *series() {
        for (let i = 0; i < count; i++) yield i === count - 1 ? [{ instance: `i${i}` }, 1] : null;
      },
    });
    const turns = ticks.stop();
    expect(text).toBe(`# HELP g h\n# TYPE g gauge\ng{instance="i${count - 1}"} 1\n`);
    expect(turns).toBeGreaterThanOrEqual(3);
  });
});
