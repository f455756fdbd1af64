/** The switch that forces the stream relay's slow path: on by default, 0 or 1 from the environment, nothing else. */
import { expect, it } from 'vitest';
import { resolveConfig } from '../../src/config-resolve.js';

const fast = (env: Record<string, string>): boolean => resolveConfig({ home: '/tmp/x' }, env, '/tmp').relayFastPath;

it('is on by default and with 1, off with 0', () => {
  expect(fast({})).toBe(true);
  expect(fast({ OB_PROXY_RELAY_FAST_PATH: '' })).toBe(true);
  expect(fast({ OB_PROXY_RELAY_FAST_PATH: '1' })).toBe(true);
  expect(fast({ OB_PROXY_RELAY_FAST_PATH: '0' })).toBe(false);
});

it('refuses anything else, rather than guess what "no" or "false " meant', () => {
  for (const v of ['false', 'no', 'off', '2', ' 0'])
    expect(() => fast({ OB_PROXY_RELAY_FAST_PATH: v })).toThrow(/must be 0 or 1/);
});
