/**
 * A real terminal for tests, from npm: a pseudo-terminal (@lydell/node-pty) of a given size runs
 * the command, and a headless xterm.js (@xterm/headless) draws what it writes, as a person's
 * terminal would. Tests type keys, wait for text on the screen, and read the screen as lines.
 * The terminal answers the program's queries (cursor position, device attributes) through the
 * pty, as a real one does.
 */
import pty from '@lydell/node-pty';
import xterm from '@xterm/headless';
import stringWidth from 'string-width';

/** Keys as a terminal sends them. */
export const KEY = { enter: '\r', escape: '\x1b', up: '\x1b[A', down: '\x1b[B', ctrlC: '\x03' } as const;

/**
 * Cell widths as today's terminals give them (tmux, VTE, iTerm2): two cells for East Asian Wide
 * and Fullwidth code points, emoji included, none for combining marks. xterm.js alone knows only
 * Unicode 6, where an emoji takes one cell.
 */
const widths = new Map<number, 0 | 1 | 2>();
function wcwidth(codepoint: number): 0 | 1 | 2 {
  let w = widths.get(codepoint);
  if (w === undefined) {
    w = Math.min(2, stringWidth(String.fromCodePoint(codepoint))) as 0 | 1 | 2;
    widths.set(codepoint, w);
  }
  return w;
}
const modernWidths = {
  version: 'modern',
  wcwidth,
  // xterm.js's packed value: width in bits 1-2, "joins the previous character" in bit 0 (a
  // zero-width code point after a visible one joins it and keeps its width).
  charProperties(codepoint: number, preceding: number): number {
    let width: number = wcwidth(codepoint);
    let join = width === 0 && preceding !== 0;
    if (join) {
      const before = (preceding >> 1) & 3;
      if (before === 0) join = false;
      else width = Math.max(width, before);
    }
    return ((width & 3) << 1) | (join ? 1 : 0);
  },
};

export interface TerminalOptions {
  cols: number;
  rows: number;
  /** The program's whole environment (default this process's). TERM is xterm-256color unless set. */
  env?: Record<string, string | undefined>;
  cwd?: string;
}

export interface Terminal {
  readonly pid: number;
  /** Types `keys` as given (see KEY for Enter and the like). */
  write(keys: string): void;
  /** The screen now: one string per row, trailing blanks trimmed, wide characters once. */
  lines(): string[];
  /** The screen now as text, each row ending in a newline. */
  screen(): string;
  /** The normal screen with all its scrollback, and the screen shown (the alternate one, if on). */
  everything(): string;
  /** Resolves with the screen once `match` holds on it; fails with the last screen after `timeoutMs`. */
  waitFor(match: string | RegExp | ((screen: string) => boolean), what: string, timeoutMs?: number): Promise<string>;
  /** The program's exit code (a signal counts as 128 + its number). */
  readonly exited: Promise<number>;
  /** SIGKILL if it still runs; resolves once it has gone. */
  close(): Promise<void>;
}

/** Runs `file args` in a new pseudo-terminal of `cols` × `rows`. */
export function spawnTerminal(file: string, args: string[], opts: TerminalOptions): Terminal {
  const term = new xterm.Terminal({ cols: opts.cols, rows: opts.rows, allowProposedApi: true, scrollback: 10_000 });
  term.unicode.register(modernWidths);
  term.unicode.activeVersion = modernWidths.version;
  const env = { ...(opts.env ?? process.env) };
  env.TERM ??= 'xterm-256color';
  const proc = pty.spawn(file, args, {
    name: env.TERM,
    cols: opts.cols,
    rows: opts.rows,
    env,
    ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
  });
  let gone = false;
  const exited = new Promise<number>((resolve) => {
    proc.onExit(({ exitCode, signal }) => {
      gone = true;
      resolve(signal ? 128 + signal : exitCode);
    });
  });
  const watchers = new Set<() => void>();
  proc.onData((data) => term.write(data));
  // A program that wraps its frames in synchronized updates (DEC mode 2026, as Ink does) is
  // judged on whole frames, as a terminal that honours the mode shows them: a pty read can end
  // mid-frame, and a screen half redrawn would match text the frame has not finished with.
  const midFrame = (): boolean => term.modes.synchronizedOutputMode;
  term.onWriteParsed(() => {
    if (midFrame()) return;
    for (const w of watchers) w();
  });
  term.onData((reply) => {
    if (!gone) proc.write(reply);
  });

  const rowsOf = (buffer: xterm.IBuffer, from: number, to: number): string[] => {
    const out: string[] = [];
    for (let y = from; y < to; y++) out.push(buffer.getLine(y)?.translateToString(true) ?? '');
    return out;
  };
  const lines = (): string[] => {
    const b = term.buffer.active;
    return rowsOf(b, b.viewportY, b.viewportY + term.rows);
  };
  const screen = (): string => lines().join('\n') + '\n';

  return {
    pid: proc.pid,
    write(keys) {
      proc.write(keys);
    },
    lines,
    screen,
    everything() {
      const normal = term.buffer.normal;
      const all = rowsOf(normal, 0, normal.length);
      if (term.buffer.active.type === 'alternate') all.push(...lines());
      return all.join('\n') + '\n';
    },
    waitFor(match, what, timeoutMs = 15_000) {
      const test = (s: string): boolean =>
        typeof match === 'string' ? s.includes(match) : match instanceof RegExp ? match.test(s) : match(s);
      return new Promise((resolve, reject) => {
        let settled = false;
        const finish = (settle: () => void): void => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          watchers.delete(check);
          settle();
        };
        const check = (): void => {
          if (midFrame()) return;
          const s = screen();
          if (test(s)) finish(() => resolve(s));
        };
        const timer = setTimeout(
          () => finish(() => reject(new Error(`timed out waiting for ${what}\n--- screen ---\n${screen()}`))),
          timeoutMs,
        );
        watchers.add(check);
        // What the program drew before it exited is all it will draw.
        void exited.then(() =>
          // Let the last writes be parsed first.
          term.write('', () => {
            check();
            finish(() => reject(new Error(`the program exited before ${what}\n--- screen ---\n${screen()}`)));
          }),
        );
        check();
      });
    },
    exited,
    async close() {
      if (!gone) proc.kill('SIGKILL');
      await exited;
      term.dispose();
    },
  };
}
