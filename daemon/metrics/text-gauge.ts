import { TurnBudget } from '../turn-budget.js';

/** Series written (or things read) between two turns of the event loop: a millisecond or two of text. */
export const SERIES_A_TURN = 1_000;

/**
 * A gauge with a series per instance, read from the registry at scrape time and written as
 * Prometheus text by the daemon itself rather than held in prom-client: at 50,000 instances its
 * 100,000 series set in prom-client and written in one go held every request for 110 to 170 ms a
 * scrape (1.8 to 2.4 s when every key was an increment).
 */
export interface TextGauge {
  name: string;
  help: string;
  /**
   * Its series, made as they are read: the labels (in order) and the value; null for a thing read
   * that makes no series, counted as work all the same (a walk of 50,000 instances, none probed,
   * made no series and held the loop 38 ms).
   */
  series(): Iterable<readonly [Readonly<Record<string, string>>, number] | null>;
}

/** A label value as the text format quotes it. */
function quoted(value: string): string {
  return `"${value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')}"`;
}

/**
 * The gauge's exposition (HELP, TYPE, a line a series) in pieces of SERIES_A_TURN series at most
 * (turn-budget.ts), with a turn of the event loop between them: a scrape writes each piece as it
 * is made, so no text of every series is ever held (a rope of 2.7 MB, encoded at once, held the
 * loop for 50 ms).
 */
export async function* gaugePieces(g: TextGauge): AsyncGenerator<string> {
  let text = `# HELP ${g.name} ${g.help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}\n# TYPE ${g.name} gauge\n`;
  const budget = new TurnBudget(SERIES_A_TURN);
  for (const s of g.series()) {
    if (s !== null) {
      const [labels, value] = s;
      let pairs = '';
      for (const name of Object.keys(labels)) pairs += `${pairs === '' ? '' : ','}${name}=${quoted(labels[name]!)}`;
      text += `${g.name}{${pairs}} ${value}\n`;
    }
    if (budget.spent()) {
      if (text !== '') yield text;
      text = '';
      await budget.pause();
    }
  }
  if (text !== '') yield text;
}

/** The gauge's whole exposition, made as the pieces are. */
export async function gaugeText(g: TextGauge): Promise<string> {
  let text = '';
  for await (const piece of gaugePieces(g)) text += piece;
  return text;
}
