/**
 * The lines `--trace-gc-nvp` printed in a window, summed: scavenges, other collections
 * (mark-compacts), the bytes scavenges promoted and their pause in ms; and the young
 * generation's smallest and largest capacity in the window (MiB, 0 when no line gave it), since
 * V8 sizes it as it goes and a smaller one is scavenged more often.
 */
export function gcOfNvp(text) {
  const g = { scavenges: 0, others: 0, promoted: 0, pauseMs: 0, minNewMiB: 0, maxNewMiB: 0 };
  for (const line of text.split('\n')) {
    const kind = / gc=(\w+) /.exec(` ${line}`)?.[1];
    if (kind === undefined) continue;
    const cap = / new_space_capacity=(\d+)/.exec(line);
    if (cap !== null) {
      const mib = Number(cap[1]) / 1048576;
      g.minNewMiB = g.minNewMiB === 0 ? mib : Math.min(g.minNewMiB, mib);
      g.maxNewMiB = Math.max(g.maxNewMiB, mib);
    }
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
