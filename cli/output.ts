import { Chalk, type ChalkInstance } from 'chalk';
import stringWidth from 'string-width';
import { printable, printableJson } from '../src/printable.js';

export interface Io {
  out(text: string): void;
  err(text: string): void;
  isTTY: boolean;
  /** Asks a person at a terminal and returns the answer; absent when no one can answer (a script). */
  ask?: (question: string) => Promise<string>;
  env: Readonly<Record<string, string | undefined>>;
}

/** Colour only on a terminal, and never with NO_COLOR (docs/contract.md §2). */
export function colours(io: Io): ChalkInstance {
  const off = !io.isTTY || (io.env.NO_COLOR !== undefined && io.env.NO_COLOR !== '');
  return new Chalk({ level: off ? 0 : 1 });
}

export function printJson(io: Io, value: unknown): void {
  io.out(`${printableJson(value, 2)}\n`);
}

/**
 * A daemon's answer made safe to print: every string in it escaped (src/printable.ts). Applied to
 * whole views before they are formatted, because the formatting adds colours a terminal must
 * act on. Never for --json, which keeps the exact values.
 */
export function shown<T>(value: T): T {
  if (typeof value === 'string') return printable(value) as T;
  if (Array.isArray(value)) return value.map((v: unknown) => shown(v)) as T;
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, shown(v as unknown)])) as T;
  }
  return value;
}

/** A message from the daemon or a library, as one printable line. */
export function errorLine(message: string): string {
  return `error: ${printable(message.replace(/\s*\n\s*/g, ' '))}\n`;
}

/** A plain aligned table; the last column is never padded. */
export function table(rows: string[][]): string {
  if (rows.length === 0) return '';
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => visibleLength(r[c] ?? ''))));
  return (
    rows
      .map((r) =>
        r
          .map((cell, c) => (c === r.length - 1 ? cell : cell + ' '.repeat(widths[c]! - visibleLength(cell))))
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}

/** Terminal cells, colours left out: a CJK character or an emoji takes two, a combining mark none. */
function visibleLength(s: string): number {
  return stringWidth(s);
}

export function stateColour(c: ChalkInstance, state: string): string {
  switch (state) {
    case 'ready':
      return c.green(state);
    case 'pending':
      return c.yellow(state);
    case 'stopped':
      return c.gray(state);
    default:
      return c.red(state);
  }
}

/** The one display of a secret: boxed, with what to do next. */
export function secretBlock(c: ChalkInstance, title: string, secret: string, baseUrl: string): string {
  return (
    [
      c.bold(title),
      '',
      `  ${c.cyan(secret)}`,
      '',
      `  This secret is shown once and stored only as a hash. Save it now.`,
      baseUrl === '' ? '' : `  Use it with any OpenAI SDK: baseURL ${baseUrl}/v1, apiKey <the secret>.`,
      '',
    ]
      .filter((l, i, a) => !(l === '' && a[i - 1] === ''))
      .join('\n') + '\n'
  );
}
