/* global console, process */
/**
 * `node bench/regime-trigger.mjs TARGET… [--rounds 4] [--kind stream] [--windows 4] [--seconds 3]
 * [--idle S] [--node-flags "…"]`: whether a process can be pushed into the costly collection
 * regime (docs/performance.md, sessions 7, 15 and 16). TARGET is DIR[+variant] (a built
 * checkout's daemon, as bench/ab-pinned.mjs takes it) or `reference` (bench/reference-proxy.mjs).
 * Each round starts it anew with --expose-gc and --trace-gc-nvp, loads it with wrk, measures a
 * window, then applies the trigger and measures --windows more windows of the same load. The
 * trigger, by default: SIGUSR2 in the middle of the load, on which a preload runs two minor
 * collections back to back, so that every object alive then (each request in flight) is promoted
 * and soon dies in the old generation; a chain of dead old objects holding young ones (the
 * regime's mark, session 7) would then keep promoting kilobytes a request. With --idle S: S
 * seconds with no load instead, as the bench's interleaved repetitions leave a daemon idle while
 * the others are measured. Prints per window: bytes promoted and scavenges per 1,000 requests,
 * mark-compacts, req/s.
 */
/**
 * `node bench/regime-trigger.mjs TARGET… [--rounds 4] [--kind stream] [--windows 4]`: whether a
 * process falls into the costly collection regime (docs/performance.md, sessions 7 and 15) when
 * everything it holds is promoted at once. TARGET is DIR[+variant] (a built checkout's daemon) or
 * `reference` (bench/reference-proxy.mjs). Each round starts it anew with --expose-gc and
 * --trace-gc-nvp, loads it with wrk, measures a window, then sends SIGUSR2, on which a preload
 * runs two minor collections back to back (every object alive then is promoted, as a long pause
 * promotes every request in flight), and measures --windows more windows of the same load. A
 * process with no chain of dead old objects holding young ones goes back to promoting tens of
 * bytes a request within a window; one with such a chain keeps promoting kilobytes.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { gcOfNvp } from './gc-nvp.mjs';
import { startVariant, wait } from './native-harness.mjs';
import { bodies } from './scenarios.mjs';
import { startUpstream } from './targets.mjs';
import { runWrk } from './wrk.mjs';

const { values: a, positionals: targets } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '4' },
    kind: { type: 'string', default: 'stream' },
    windows: { type: 'string', default: '4' },
    seconds: { type: 'string', default: '3' },
    connections: { type: 'string', default: '64' },
    minors: { type: 'string', default: '2' },
    idle: { type: 'string', default: '0' },
    'node-flags': { type: 'string', default: '' },
  },
});
const tmp = mkdtempSync(join(tmpdir(), 'obtrig-'));
const file = join(tmp, 'body.json');
writeFileSync(file, bodies()[a.kind]);
const preload = join(tmp, 'trigger.cjs');
writeFileSync(
  preload,
  `process.on('SIGUSR2', () => { for (let i = 0; i < ${Number(a.minors)}; i++) globalThis.gc({ type: 'minor' }); });\n`,
);
const nodeArgs = [
  '--max-semi-space-size=8',
  '--trace-gc-nvp',
  '--expose-gc',
  '--require',
  preload,
  ...a['node-flags'].split(' ').filter(Boolean),
];
const idleS = Number(a.idle);
const COSTLY = 1000;

async function start(target, onStdout) {
  if (target !== 'reference') {
    const d = await startVariant(target, { nodeArgs, onStdout });
    return { pid: d.proc.pid, url: d.url, headers: { Authorization: `Bearer ${d.secret}` }, stop: d.stop };
  }
  const up = await startUpstream();
  const proc = spawn(
    process.execPath,
    [...nodeArgs, join(import.meta.dirname, 'reference-proxy.mjs'), '--upstream', up.url],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const url = await new Promise((done, fail) => {
    let out = '';
    proc.stdout.setEncoding('utf8').on('data', (s) => {
      onStdout(s);
      out += s;
      const line = out.split('\n').find((l) => l.includes('"url"'));
      if (line !== undefined) done(JSON.parse(line).url);
    });
    proc.once('exit', (code) => fail(new Error(`reference proxy exited ${code}`)));
  });
  return {
    pid: proc.pid,
    url,
    headers: {},
    stop: async () => {
      proc.kill('SIGTERM');
      await new Promise((r) => (proc.exitCode !== null ? r() : proc.once('exit', r)));
      await up.stop();
    },
  };
}

try {
  for (const target of targets) {
    const stuck = [];
    for (let round = 0; round < Number(a.rounds); round++) {
      let nvp = '';
      const [dir, ...variants] = target.split('+');
      const t = await start(target === 'reference' ? target : [resolve(dir), ...variants].join('+'), (s) => {
        nvp += s;
      });
      const load = (s) =>
        runWrk({
          url: t.url,
          path: '/v1/chat/completions',
          bodyFile: file,
          headers: t.headers,
          connections: Number(a.connections),
          durationS: s,
          scriptFile: join(tmp, `${t.pid}.lua`),
        });
      try {
        await load(3);
        const windows = [];
        for (let w = 0; w <= Number(a.windows); w++) {
          if (w === 1) {
            if (idleS > 0) {
              await wait(idleS * 1000);
            } else {
              // Mid-load, so the requests in flight are promoted with everything else; the
              // window it falls in is not measured.
              const r = load(Number(a.seconds) + 1);
              await wait(500);
              process.kill(t.pid, 'SIGUSR2');
              await r;
            }
          }
          nvp = '';
          const r = await load(Number(a.seconds));
          const g = gcOfNvp(nvp);
          windows.push({
            promoted: g.promoted / r.requests,
            scavenges: (g.scavenges * 1000) / r.requests,
            mc: g.others,
            rps: r.rps,
          });
        }
        const show = (x) =>
          `${Math.round(x.promoted)} B promoted, ${x.scavenges.toFixed(1)} scavenges per 1,000, ${x.mc} mark-compacts, ${Math.round(x.rps)} req/s`;
        console.log(
          `${target} round ${round + 1}: before: ${show(windows[0])}; after: ${windows.slice(1).map(show).join('; ')}`,
        );
        stuck.push(windows.slice(1).every((x) => x.promoted > COSTLY));
      } finally {
        await t.stop();
      }
    }
    console.log(
      `${target}: ${stuck.filter(Boolean).length} of ${stuck.length} rounds kept promoting over ${COSTLY} B a request after the trigger`,
    );
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
