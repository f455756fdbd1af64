/**
 * /metrics is written a piece at a time as it is made: at 50,000 instances the whole text, made
 * and then encoded at once, held every request for 50 ms a scrape.
 */
import { expect, it } from 'vitest';
import { Metrics } from '../../daemon/metrics/metrics.js';
import { listenMetrics } from '../../daemon/metrics/metrics-server.js';
import { SERIES_A_TURN } from '../../daemon/metrics/text-gauge.js';
import type { Registry as KeyRegistry } from '../../src/services/registry.js';
import { turnsDuring } from '../helpers/event-loop-turns.js';

it('sends the whole exposition in pieces, with other work between them', async () => {
  const count = SERIES_A_TURN * 3 + 1;
  const instances = new Map<string, object>();
  for (let i = 0; i < count; i++) instances.set(`gpu-${i}`, {});
  const keysOf = (id: string) => [{ id: `k-${id}`, instance: id, status: 'active' }];
  const m = new Metrics({
    keyLabel: true,
    keys: () => ({ instances, keys: new Map(), keysOf }) as unknown as KeyRegistry,
  });
  const server = await listenMetrics(m, '127.0.0.1', 0);
  try {
    const ticks = turnsDuring();
    const res = await fetch(server.url);
    const body = await res.text();
    const turns = ticks.stop();
    expect(res.status).toBe(200);
    const keys = body.split('\n').filter((l) => l.startsWith('ob_proxy_keys{'));
    expect(keys).toHaveLength(count);
    expect(keys.at(-1)).toBe(`ob_proxy_keys{instance="gpu-${count - 1}",status="active"} 1`);
    expect(body.endsWith('\n')).toBe(true);
    // The same text a scrape made at once gives, but for the process figures that moved meanwhile.
    const steady = (text: string) =>
      text.split('\n').filter((l) => !l.startsWith('ob_proxy_process_') && !l.startsWith('ob_proxy_nodejs_'));
    expect(steady(body)).toEqual(steady(await m.scrape()));
    expect(turns).toBeGreaterThanOrEqual(3);
  } finally {
    await server.close();
  }
});

it('has sent its first pieces before it makes the last: a failure midway cuts the answer short', async () => {
  const count = SERIES_A_TURN * 4;
  const instances = new Map<string, object>();
  for (let i = 0; i < count; i++) instances.set(`gpu-${i}`, {});
  const keysOf = (id: string) => {
    if (id === `gpu-${SERIES_A_TURN * 3}`) throw new Error('the registry broke');
    return [{ id: `k-${id}`, instance: id, status: 'active' }];
  };
  const m = new Metrics({
    keyLabel: true,
    keys: () => ({ instances, keys: new Map(), keysOf }) as unknown as KeyRegistry,
  });
  const server = await listenMetrics(m, '127.0.0.1', 0);
  try {
    const res = await fetch(server.url);
    // Made at once, the failure would have been a 500 with nothing of the text sent.
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    let text = '';
    const decoder = new TextDecoder();
    await expect(
      (async () => {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) return;
          text += decoder.decode(value, { stream: true });
        }
      })(),
    ).rejects.toThrow();
    expect(text).toContain('# TYPE ob_proxy_keys gauge\nob_proxy_keys{instance="gpu-0",status="active"} 1\n');
    expect(text).not.toContain(`instance="gpu-${SERIES_A_TURN * 3}"`);
  } finally {
    await server.close();
  }
});
