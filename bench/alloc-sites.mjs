/* global console, Buffer, WebSocket */
/**
 * `node bench/alloc-sites.mjs [--dir CHECKOUT] [--body stream|plain] [--requests 3000]
 * [--warmup 3000] [--concurrency 32] [--interval 256] [--top 40]`: where the daemon's JavaScript
 * heap allocations come from, per request. The daemon runs with the inspector on; after the
 * warm-up, V8's sampling heap profiler is started with collected objects kept (minor and major
 * collections), so the profile counts every sampled allocation, short-lived ones included, and
 * not only what survives. Prints bytes per request by allocating function (file:line), the
 * sampled total beside it. Sampled, so a function's figure is accurate to a few percent at the
 * default interval over a few thousand requests; for exact totals use bench/native-counters.mjs.
 */
import { parseArgs } from 'node:util';
import { resolve } from 'node:path';
import { bodies } from './scenarios.mjs';
import { drive, startDaemon, wait } from './native-harness.mjs';

const ROOT = resolve(import.meta.dirname, '..');
const { values: a } = parseArgs({
  options: {
    dir: { type: 'string' },
    body: { type: 'string' },
    requests: { type: 'string' },
    warmup: { type: 'string' },
    concurrency: { type: 'string' },
    interval: { type: 'string' },
    top: { type: 'string' },
  },
});
const dir = resolve(a.dir ?? ROOT);
const kind = a.body ?? 'stream';
const n = Number(a.requests ?? 3000);
const body = Buffer.from(bodies()[kind]);
const conc = Number(a.concurrency ?? 32);

let wsUrl = null;
const daemon = await startDaemon(dir, {
  nodeArgs: ['--max-semi-space-size=4', '--inspect=127.0.0.1:0'],
  onStderr: (s) => {
    wsUrl ??= /ws:\/\/\S+/.exec(s)?.[0] ?? null;
  },
});
try {
  await drive(daemon.url, daemon.secret, body, kind, Number(a.warmup ?? 3000), conc);
  const ws = new WebSocket(wsUrl);
  await new Promise((r, f) => {
    ws.onopen = r;
    ws.onerror = f;
  });
  let id = 0;
  const pending = new Map();
  ws.onmessage = (e) => {
    const m = JSON.parse(e.data);
    if (m.id !== undefined) pending.get(m.id)?.(m);
  };
  const call = (method, params = {}) =>
    new Promise((r, f) => {
      const i = ++id;
      pending.set(i, (m) => (m.error ? f(new Error(JSON.stringify(m.error))) : r(m.result)));
      ws.send(JSON.stringify({ id: i, method, params }));
    });
  await call('HeapProfiler.enable');
  await call('HeapProfiler.startSampling', {
    samplingInterval: Number(a.interval ?? 256),
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: true,
  });
  await drive(daemon.url, daemon.secret, body, kind, n, conc);
  const { profile } = await call('HeapProfiler.stopSampling');
  ws.close();
  const bySite = new Map();
  let total = 0;
  const walk = (node, stack) => {
    const f = node.callFrame;
    const file = f.url
      .replace(/^file:\/\//, '')
      .replace(dir, '')
      .replace(/^.*node_modules\//, '');
    const site = `${f.functionName || '(anon)'} ${file}:${f.lineNumber + 1}`;
    if (node.selfSize > 0) {
      // The nearest caller in our own code, so undici's and Node's allocations are told by who asked.
      const own = stack.findLast((s) => /\/(dist|src|daemon)\//.test(s) && !s.includes('node_modules')) ?? '';
      const key = `${site}  <= ${own}`;
      bySite.set(key, (bySite.get(key) ?? 0) + node.selfSize);
      total += node.selfSize;
    }
    for (const c of node.children) walk(c, [...stack, site]);
  };
  walk(profile.head, []);
  console.log(`${dir} ${kind}: ${Math.round(total / n)} sampled bytes per request over ${n}`);
  for (const [k, v] of [...bySite].sort((x, y) => y[1] - x[1]).slice(0, Number(a.top ?? 40)))
    console.log(`${String(Math.round(v / n)).padStart(7)}  ${k}`);
  await wait(100);
} finally {
  await daemon.stop();
}
