/* global console, process */
/**
 * `node bench/regime-together.mjs DIR[+variant] DIR[+variant] [--rounds 6] [--kind stream]
 * [--connections 64] [--seconds 6]`: the collection regime of two daemons loaded at the same
 * time, as `npm run bench`'s side-by-side rounds load them (both under wrk on the same two cores,
 * so each request lasts about twice as long as on a quiet machine). Each round starts both anew
 * with `--trace-gc-nvp`, warms them together, then measures them together, and prints per daemon:
 * req/s, bytes promoted by scavenges per request, other collections (mark-compacts) and peak
 * RSS. A daemon in the costly regime (docs/performance.md, sessions 7 and 15) promotes kilobytes
 * per request where the cheap one promotes tens of bytes.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { gcOfNvp } from './gc-nvp.mjs';
import { startVariant } from './native-harness.mjs';
import { bodies } from './scenarios.mjs';
import { runWrk } from './wrk.mjs';

const { values: a, positionals: specs } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '6' },
    kind: { type: 'string', default: 'stream' },
    connections: { type: 'string', default: '64' },
    seconds: { type: 'string', default: '6' },
    'node-flags': { type: 'string', default: '' },
  },
});
if (specs.length !== 2) {
  console.error('usage: node bench/regime-together.mjs DIR[+variant] DIR[+variant] [--rounds N]');
  process.exit(2);
}
const tmp = mkdtempSync(join(tmpdir(), 'obregime-'));
const file = join(tmp, 'body.json');
writeFileSync(file, bodies()[a.kind]);
const flags = ['--max-semi-space-size=8', '--trace-gc-nvp', ...a['node-flags'].split(' ').filter(Boolean)];
const peakRss = (pid) => Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
const load = (d, s) =>
  runWrk({
    url: d.url,
    path: '/v1/chat/completions',
    bodyFile: file,
    headers: { Authorization: `Bearer ${d.secret}` },
    connections: Number(a.connections),
    durationS: s,
    scriptFile: join(tmp, `${d.proc.pid}.lua`),
  });
const costly = specs.map(() => 0);
try {
  for (let round = 0; round < Number(a.rounds); round++) {
    const order = round % 2 === 0 ? [0, 1] : [1, 0];
    const nvp = ['', ''];
    const ds = [];
    try {
      for (const i of order)
        ds[i] = await startVariant(specs[i], {
          nodeArgs: flags,
          onStdout: (text) => {
            nvp[i] += text;
          },
        });
      await Promise.all(ds.map((d) => load(d, 4)));
      nvp[0] = nvp[1] = '';
      const rs = await Promise.all(ds.map((d) => load(d, Number(a.seconds))));
      for (const i of [0, 1]) {
        const g = gcOfNvp(nvp[i]);
        const per = g.promoted / rs[i].requests;
        if (per > 1000) costly[i]++;
        console.log(
          `round ${round + 1} ${specs[i]}: ${Math.round(rs[i].rps)} req/s, ${Math.round(per)} B promoted per request, ` +
            `${g.scavenges} scavenges, ${g.others} other collections, peak RSS ${peakRss(ds[i].proc.pid).toFixed(1)} MiB`,
        );
      }
    } finally {
      await Promise.all(ds.filter(Boolean).map((d) => d.stop()));
    }
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
for (const [i, spec] of specs.entries())
  console.log(`${spec}: ${costly[i]} of ${a.rounds} rounds promoted more than 1 KB per request`);
