import { describe, expect, it } from 'vitest';
import { rate, sparkline } from '../../cli/console/sparkline.js';

describe('sparkline', () => {
  it('scales to the largest sample shown, one bar per sample', () => {
    expect(sparkline([0, 1, 2, 4, 8], 5)).toBe('▁▂▃▅█');
    expect(sparkline([8, 8, 8], 3)).toBe('███');
    expect(sparkline([0, 7, 0, 7], 4)).toBe('▁█▁█');
  });

  it('keeps the last `width` samples, and pads fewer on the left so the line grows from the right', () => {
    expect(sparkline([1, 2, 3, 4, 5, 6], 3)).toBe('▆▇█');
    expect(sparkline([2, 4], 5)).toBe('   ▅█');
    expect(sparkline([], 4)).toBe('    ');
    expect(sparkline([1, 2], 0)).toBe('');
  });

  it('draws idle as the lowest bar and any activity above it, however small beside the peak', () => {
    expect(sparkline([0, 0, 0], 3)).toBe('▁▁▁');
    expect(sparkline([1, 1000], 2)).toBe('▂█');
  });

  it('treats what is not a positive number as zero', () => {
    expect(sparkline([Number.NaN, -3, Number.POSITIVE_INFINITY, 2], 4)).toBe('▁▁▁█');
  });

  it('uses a fixed scale when given one', () => {
    expect(sparkline([1, 2], 2, 4)).toBe('▃▅');
    expect(sparkline([8], 1, 4)).toBe('█');
  });
});

describe('rate', () => {
  it('fits a rate in a few characters', () => {
    expect(
      [0, -1, Number.NaN, 0.04, 0.44, 3.25, 9.96, 12.4, 999, 9999.4, 12_345, 9_999_999, 12_000_000].map(rate),
    ).toEqual(['0', '0', '0', '0', '0.4', '3.3', '10', '12', '999', '9999', '12.3k', '10000k', '12M']);
  });
});
