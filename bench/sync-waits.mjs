/* global process, performance, setTimeout */
/**
 * How many syncs a key creation and a stop wait for, one after the other, in the lowdb store:
 * the part of a commit's latency that is ob-proxy's design, not the disk's. Every `sync` and
 * `datasync` of a FileHandle is made to take `--delay` ms more (default 20) on a tmpfs, where a
 * sync otherwise costs nothing, so an operation's time is about (syncs waited in a row) × delay,
 * however loaded the machine. In process: LifecycleService over LowdbStore from each build's dist/.
 *
 * `npx node bench/sync-waits.mjs [--build name=path/to/dist …] [--rounds 40] [--delay 20] [--dir /dev/shm]`
 * (default build: this checkout's dist/).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const ROOT = resolve(import.meta.dirname, '..');
const { values: a } = parseArgs({
  options: {
    build: { type: 'string', multiple: true },
    rounds: { type: 'string' },
    delay: { type: 'string' },
    dir: { type: 'string' },
  },
});
const builds = (a.build ?? [`this=${join(ROOT, 'dist')}`]).map((b) => {
  const [name, dist] = b.split('=');
  return { name, dist: resolve(dist) };
});
const rounds = Number(a.rounds ?? 40);
const delay = Number(a.delay ?? 20);
const dir = a.dir ?? '/dev/shm';

// FileHandle's prototype, from a handle: the same class every build's store uses.
const probe = await open(process.execPath, 'r');
const FileHandle = Object.getPrototypeOf(probe);
await probe.close();
const wait = (ms) => new Promise((r) => setTimeout(r, ms));
for (const m of ['sync', 'datasync']) {
  const real = FileHandle[m];
  FileHandle[m] = async function slowed() {
    await wait(delay);
    return real.call(this);
  };
}

function summary(ms) {
  const s = [...ms].sort((x, y) => x - y);
  const q = (p) => s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
  return `p50 ${q(50).toFixed(1)} (${(q(50) / delay).toFixed(2)} syncs) p90 ${q(90).toFixed(1)} max ${s[s.length - 1].toFixed(1)} ms`;
}

for (const { name, dist } of builds) {
  const { LifecycleService } = await import(join(dist, 'src/services/lifecycle.js'));
  const { LowdbStore } = await import(join(dist, 'src/store/lowdb-store.js'));
  const { cryptoSecretSource } = await import(join(dist, 'src/domain/api-key.js'));
  const home = mkdtempSync(join(dir, 'syncwaits-'));
  try {
    const store = new LowdbStore(join(home, 'db.json'));
    const lc = await LifecycleService.open({
      store,
      clock: { now: () => Date.now() },
      secrets: cryptoSecretSource,
      models: ['gemma4:26b'],
    });
    const create = [];
    const stop = [];
    for (let r = 0; r < rounds; r++) {
      const id = `m-${r}`;
      await lc.addInstance({ id, model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9/v1' });
      await (
        await lc.ready(id)
      ).defaultKey;
      for (let k = 0; k < 10; k++) await lc.createKey(id, `k${k}`);
      let t = performance.now();
      await lc.createKey(id, 'timed');
      create.push(performance.now() - t);
      t = performance.now();
      await lc.halt(id, 'stop');
      stop.push(performance.now() - t);
    }
    await lc.close();
    process.stdout.write(
      `${name.padEnd(10)} each sync +${delay} ms, ${rounds} rounds: key creation ${summary(create)}; stop (12 keys) ${summary(stop)}\n`,
    );
  } finally {
    rmSync(home, { recursive: true, force: true });
  }
}
