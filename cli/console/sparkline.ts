/**
 * Sparklines for the console's live figures: one character per sample, eight heights, scaled to
 * the largest sample shown. Pure, so it is tested on its own (test/console/sparkline.test.ts).
 *
 *   sparkline([0, 1, 2, 4, 8], 5)  →  "▁▂▃▅█"
 */
const BARS = '▁▂▃▄▅▆▇█';

/**
 * The last `width` samples as bars; fewer samples are padded on the left with spaces, so a line
 * fills up from the right as time passes. Zero (and anything not a positive finite number) is
 * the lowest bar; any activity at all is at least the second, so a quiet second never looks
 * like an idle one. `max` fixes the scale (0 or absent: the largest sample shown).
 */
export function sparkline(samples: readonly number[], width: number, max?: number): string {
  if (width <= 0) return '';
  const shown = samples.slice(-width).map((v) => (Number.isFinite(v) && v > 0 ? v : 0));
  const top = max !== undefined && max > 0 ? max : Math.max(0, ...shown);
  const bars = shown.map((v) => {
    if (v === 0 || top === 0) return BARS[0];
    const level = Math.max(1, Math.min(BARS.length - 1, Math.round((v / top) * (BARS.length - 1))));
    return BARS[level];
  });
  return ' '.repeat(width - bars.length) + bars.join('');
}

/** A rate for a narrow column: "0", "0.4", "12", "3.4k". */
export function rate(n: number): string {
  if (!Number.isFinite(n) || n <= 0) return '0';
  if (n < 10) return (Math.round(n * 10) / 10).toString();
  if (n < 10_000) return String(Math.round(n));
  if (n < 10_000_000) return `${(Math.round(n / 100) / 10).toString()}k`;
  return `${Math.round(n / 1_000_000)}M`;
}
