/**
 * The lines `--trace-gc-nvp` printed in a window, summed: scavenges, other collections
 * (mark-compacts), the bytes scavenges promoted and their pause in ms.
 */
export function gcOfNvp(text) {
  const g = { scavenges: 0, others: 0, promoted: 0, pauseMs: 0 };
  for (const line of text.split('\n')) {
    const kind = / gc=(\w+) /.exec(` ${line}`)?.[1];
    if (kind === undefined) continue;
    if (kind !== 's') {
      g.others++;
      continue;
    }
    g.scavenges++;
    g.promoted += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
    g.pauseMs += Number(/ pause=([\d.]+)/.exec(line)?.[1] ?? 0);
  }
  return g;
}
