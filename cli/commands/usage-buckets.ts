import type { BucketRow, UsageBucketsReport } from '../../src/wire/usage-buckets-report.js';
import type { CliDeps } from '../common.js';
import { colours, shown, table } from '../output.js';

const CSV_HEAD = 'start,size,key,name,instance,requests,prompt_tokens,completion_tokens,errors';

/** A CSV field: quoted when it holds a comma, a quote or a line break (RFC 4180). */
export function csvField(value: string | number): string {
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/**
 * `usage --by … --csv`: one line per key and bucket, for a spreadsheet or a billing system; the
 * values exactly as stored (names as given, not escaped for a terminal), no total line.
 */
export function bucketsCsv(report: UsageBucketsReport): string {
  const lines = report.rows.map((r) =>
    [r.start, r.size, r.keyId, r.name, r.instance, r.requests, r.promptTokens, r.completionTokens, r.errors]
      .map(csvField)
      .join(','),
  );
  return `${[CSV_HEAD, ...lines].join('\r\n')}\r\n`;
}

function counts(r: Pick<BucketRow, 'requests' | 'promptTokens' | 'completionTokens' | 'errors'>): string[] {
  return [r.requests, r.promptTokens, r.completionTokens, r.errors].map(String);
}

/** `usage --by …` as a person reads it: a row per key and bucket, then the total. */
export function bucketsText(deps: CliDeps, report: UsageBucketsReport): string {
  const c = colours(deps.io);
  const r = shown(report);
  const range = `${r.since === null ? 'the first use' : r.since} to ${r.until === null ? 'now' : r.until}`;
  if (r.rows.length === 0) return `No usage by the ${r.by} from ${range}.\n`;
  const start = (row: BucketRow): string => (row.size === r.by ? row.start : `${row.start} (day)`);
  return (
    `${c.bold(`Usage by the ${r.by}, ${range} (UTC)`)}\n` +
    table([
      ['START', 'KEY', 'NAME', 'INSTANCE', 'REQUESTS', 'PROMPT', 'COMPLETION', 'ERRORS'].map((h) => c.bold(h)),
      ...r.rows.map((row) => [start(row), row.keyId, row.name, row.instance, ...counts(row)]),
      [c.bold('TOTAL'), '', '', '', ...counts(r.total)],
    ])
  );
}
