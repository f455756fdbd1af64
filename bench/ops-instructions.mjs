/* global process, console, setTimeout, Buffer */
/**
 * `node bench/ops-instructions.mjs [--requests N] [--warmup N] [--concurrency C] [--stream]
 * [--rounds R] [--variants plain,metrics,limits,concurrency,ops] [--checkout DIR] [--node-flags=…]`: what metrics and per-key limits cost,
 * counted in instructions rather than time, because wall time on a shared machine moves by
 * more than the few microseconds in question. For each variant, ob-proxy runs under
 * `valgrind --tool=callgrind`; after `--warmup` requests (JIT, pools, sockets) the counters are
 * zeroed, `--requests` more are sent at `--concurrency`, and the counters dumped: instructions
 * per request, start-up and warm-up excluded. Valgrind slows the daemon about fiftyfold, so
 * work that runs per unit of time (the event-loop delay monitor, timers) weighs more per
 * request here than in production: read it beside `npm run bench -- --ops`. So each round is
 * followed by a wait with no request (at most 30 s, scaled to the round's length), also counted:
 * `netPerRequest` is the round's count less that idle count, per request. Read it with care: with
 * `--single-threaded` the idle wait also catches work the requests left behind (a major GC, the
 * memory reducer), so it swings from a few million instructions to hundreds (docs/performance.md).
 * `--rounds R`: R rounds in the same daemon (medians printed last). `--checkout DIR`: the daemon of another built checkout (a change's
 * parent, for an A/B).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { bodies } from './scenarios.mjs';
import { OB_BIN, startObProxy, startUpstream } from './targets.mjs';
import { VARIANTS, send } from './ops-variants.mjs';

const { values: a } = parseArgs({
  options: {
    requests: { type: 'string' },
    warmup: { type: 'string' },
    concurrency: { type: 'string' },
    stream: { type: 'boolean' },
    variants: { type: 'string' },
    'node-flags': { type: 'string' },
    checkout: { type: 'string' },
    rounds: { type: 'string' },
  },
});
const N = Number(a.requests ?? 3000);
const WARM = Number(a.warmup ?? 2000);
const C = Number(a.concurrency ?? 16);
const ROUNDS = Number(a.rounds ?? 1);
const IDLE_MS = 30_000;
const variants = (a.variants ?? 'plain,ops').split(',');
const nodeFlags = (a['node-flags'] ?? '--max-semi-space-size=4 --single-threaded').split(' ').filter(Boolean);
const bin = a.checkout === undefined ? OB_BIN : join(resolve(a.checkout), 'dist/bin/ob-proxy.js');
const body = Buffer.from(bodies()[a.stream === true ? 'stream' : 'plain']);

function totalInstructions(file) {
  const m = /^(?:summary|totals):\s+(\d+)/m.exec(readFileSync(file, 'utf8'));
  if (m === null) throw new Error(`no totals in ${file}`);
  return Number(m[1]);
}

const upstream = await startUpstream();
try {
  for (const v of variants) {
    const dir = mkdtempSync(join(tmpdir(), 'obcg-'));
    const launcher = [
      'valgrind',
      '--tool=callgrind',
      `--callgrind-out-file=${join(dir, 'cg.out')}`,
      '--dump-instr=no',
      '--collect-atstart=yes',
    ];
    const t = await startObProxy(upstream.url, {
      name: v,
      bin,
      nodeArgs: nodeFlags,
      launcher,
      slow: true,
      ...VARIANTS[v],
    });
    try {
      const pid = String(t.pids()[0]);
      await send(t.url, t.headers, body, WARM, C);
      const count = async () => {
        execFileSync('callgrind_control', ['-d', pid], { stdio: 'ignore' });
        // The dump is written by the daemon's own thread when it next runs: wait for the file.
        let file;
        for (let i = 0; i < 600 && file === undefined; i++) {
          file = readdirSync(dir).find((f) => f.startsWith('cg.out.'));
          if (file === undefined) await new Promise((r) => setTimeout(r, 100));
        }
        if (file === undefined) throw new Error('callgrind wrote no dump');
        await new Promise((r) => setTimeout(r, 500));
        const ir = totalInstructions(join(dir, file));
        rmSync(join(dir, file));
        return ir;
      };
      const nets = [];
      const grosses = [];
      for (let r = 0; r < ROUNDS; r++) {
        execFileSync('callgrind_control', ['-z', pid], { stdio: 'ignore' });
        const t0 = Date.now();
        await send(t.url, t.headers, body, N, C);
        const ms = Date.now() - t0;
        const ir = await count();
        // The idle count is taken over at most IDLE_MS and scaled to the round's length: it is work per unit of time.
        const idleMs = Math.min(ms, IDLE_MS);
        execFileSync('callgrind_control', ['-z', pid], { stdio: 'ignore' });
        const i0 = Date.now();
        await new Promise((res) => setTimeout(res, idleMs));
        const idle = Math.round(((await count()) * ms) / Math.max(1, Date.now() - i0));
        const net = Math.round((ir - idle) / N);
        nets.push(net);
        grosses.push(Math.round(ir / N));
        console.log(
          JSON.stringify({
            variant: v,
            checkout: a.checkout ?? '.',
            stream: a.stream === true,
            round: r,
            requests: N,
            concurrency: C,
            instructions: ir,
            perRequest: Math.round(ir / N),
            idle,
            ms,
            netPerRequest: net,
          }),
        );
      }
      const median = (xs) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
      console.log(
        JSON.stringify({
          variant: v,
          checkout: a.checkout ?? '.',
          stream: a.stream === true,
          medianPerRequest: median(grosses),
          medianNetPerRequest: median(nets),
          perRequest: grosses,
          nets,
        }),
      );
    } finally {
      // Counted: its graceful shutdown under valgrind is only slow.
      process.kill(t.pids()[0], 'SIGKILL');
      await t.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
} finally {
  await upstream.stop();
}
