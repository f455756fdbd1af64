import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { buildDaemon } from '../../daemon/build-daemon.js';
import { COLLECT_FROM_KEYS, collectGarbage, collectLoadGarbage } from '../../daemon/load-garbage.js';
import { resolveConfig } from '../../src/config-resolve.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { bigStoreData } from '../helpers/big-store.js';

async function daemonOn(keys: number, lines: Record<string, unknown>[] = []): Promise<number> {
  const home = await mkdtemp(join(tmpdir(), 'obg-'));
  let collections = 0;
  const store = new MemoryStore(bigStoreData({ instances: Math.max(1, keys / 10), keys, events: 0 }));
  const daemon = await buildDaemon(
    { ...resolveConfig({ home, port: 0 }, {}, home), probeIntervalMs: 0, logLevel: 'debug' },
    {
      version: 'test',
      store,
      logStream: new Writable({
        write(chunk: Buffer, _e, done) {
          for (const line of chunk.toString('utf8').split('\n'))
            if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
          done();
        },
      }),
      collectGarbage: () => collections++,
    },
  );
  try {
    expect(daemon.ctx.lifecycle.registry.keys.size).toBe(keys);
    return collections;
  } finally {
    await daemon.shutdown(0);
    await rm(home, { recursive: true, force: true });
  }
}

describe('the garbage of a large store’s load is collected before the daemon serves', () => {
  it('collects once from COLLECT_FROM_KEYS keys, and not for a smaller store', () => {
    const calls: number[] = [];
    expect(collectLoadGarbage(COLLECT_FROM_KEYS - 1, () => calls.push(1))).toBe(false);
    expect(calls).toEqual([]);
    expect(collectLoadGarbage(COLLECT_FROM_KEYS, () => calls.push(1))).toBe(true);
    expect(calls).toEqual([1]);
  });

  it('a daemon built on a store of that many keys collects once; on a small one, never', async () => {
    const lines: Record<string, unknown>[] = [];
    expect(await daemonOn(COLLECT_FROM_KEYS, lines)).toBe(1);
    expect(lines.filter((l) => l.msg === "the store's load: its garbage collected")).toEqual([
      expect.objectContaining({ level: 20, keys: COLLECT_FROM_KEYS, ms: expect.any(Number) }),
    ]);
    const few: Record<string, unknown>[] = [];
    expect(await daemonOn(100, few)).toBe(0);
    expect(few.filter((l) => l.msg === "the store's load: its garbage collected")).toEqual([]);
  });

  it('V8’s collection runs without leaving a gc function in the global scope', () => {
    const before = (globalThis as { gc?: unknown }).gc;
    collectGarbage();
    expect((globalThis as { gc?: unknown }).gc).toBe(before);
  });
});
