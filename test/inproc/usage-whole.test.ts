/**
 * `GET /v1/usage` whole (no page, no lines), made and sent in pieces: the body is byte for byte
 * the report made at once (`usageReport`), keys made at one time in the order of their ids as a
 * person reads them, and other callbacks run between the pieces.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usageReport } from '../../src/wire/usage-report.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { STREAM_PAGE } from '../../daemon/management/list-pages.js';
import { bigStoreData } from '../helpers/big-store.js';
import { type Inproc, buildInproc } from '../helpers/inproc.js';
import { turnsDuring } from '../helpers/event-loop-turns.js';

const KEYS = 1700;
let d: Inproc;
// Every key made at one time, their ids of mixed case: the key list's order is not the report's.
const data = bigStoreData({ instances: 12, keys: KEYS, events: 0 });

beforeAll(async () => {
  d = await buildInproc({}, {}, new MemoryStore(data));
});

afterAll(async () => {
  await d?.close();
});

describe('GET /v1/usage whole, in pieces', () => {
  it('the body is the report made at once, for each filter', async () => {
    const registry = d.daemon.ctx.lifecycle.registry;
    // Two packs of one instance: its current one and the keys of a deployment before it.
    const old = [...registry.keys.values()].filter((k) => k.instance === 'big-5').slice(0, 3);
    for (const k of old) k.deployment = 'dep-before';
    const since = '2026-11-01T00:00:00.000Z';
    for (const [query, filter] of [
      ['', {}],
      ['?instance=big-5', { instance: 'big-5' }],
      [`?since=${since}`, { since }],
    ] as const) {
      const res = await d.manage('GET', `/v1/usage${query}`);
      expect(res.status).toBe(200);
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
      expect(res.text).toBe(JSON.stringify(usageReport(registry.instances, registry.keys.values(), filter)));
    }
    const whole = JSON.parse((await d.manage('GET', '/v1/usage')).text) as { packs: { keys: unknown[] }[] };
    expect(whole.packs.reduce((n, p) => n + p.keys.length, 0)).toBe(KEYS);
    expect(whole.packs.length).toBe(13);
  });

  it('callbacks queued meanwhile run between the pieces, before the body ends', async () => {
    const ticks = turnsDuring();
    const res = await d.manage('GET', '/v1/usage');
    const turns = ticks.stop();
    expect(res.status).toBe(200);
    // At least one turn between each two pieces of keys written.
    expect(turns).toBeGreaterThanOrEqual(Math.floor(KEYS / STREAM_PAGE));
  });
});
