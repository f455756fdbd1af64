/**
 * Ink hands a multi-character chunk to `useInput` as one input, so keys that reach the terminal
 * together (type-ahead on a busy machine, `tmux send-keys k Enter`, a key held down) would be
 * lost: "k\r" is neither k nor Enter. This stream sits between the terminal and Ink and hands
 * over one keystroke per turn of the event loop, so React has committed, and subscribed the
 * screen the previous key opened, before the next key arrives.
 */
import { EventEmitter } from 'node:events';

/** What this reads from: process.stdin, or a test's fake terminal. */
export interface KeySource extends EventEmitter {
  isTTY?: boolean;
  setRawMode?(on: boolean): unknown;
  setEncoding(encoding: BufferEncoding): unknown;
  ref?(): unknown;
  unref?(): unknown;
  pause(): unknown;
}

// CSI (ESC [ params final), SS3 (ESC O x), ESC + one character (Alt+key), a lone ESC, or one
// character (a code point, so emoji stay whole).
// eslint-disable-next-line no-control-regex
const TOKEN = /\u001b\[[0-?]*[ -/]*[@-~]|\u001bO.|\u001b[^[O]|\u001b|[\s\S]/gu;

/** Splits terminal input into keystrokes, keeping escape sequences whole. */
export function splitKeystrokes(chunk: string): string[] {
  return chunk.match(TOKEN) ?? [];
}

export class KeystrokeInput extends EventEmitter {
  readonly isTTY: boolean;
  private readonly queue: string[] = [];
  /** Keystrokes read() may still hand out in the current turn: one per 'readable'. */
  private allowance = 0;
  private scheduled = false;
  private readonly onData = (chunk: string | Buffer): void => {
    this.queue.push(...splitKeystrokes(typeof chunk === 'string' ? chunk : chunk.toString('utf8')));
    this.pump();
  };

  constructor(private readonly source: KeySource) {
    super();
    this.isTTY = source.isTTY === true;
    source.setEncoding('utf8');
    source.on('data', this.onData);
    // Ink detaches its reader between screens; keys that wait meanwhile go out when it is back.
    this.on('newListener', (event: string) => {
      if (event === 'readable') setImmediate(() => this.pump());
    });
  }

  private pump(): void {
    if (this.scheduled || this.queue.length === 0 || this.listenerCount('readable') === 0) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.allowance = 1;
      this.emit('readable');
      this.allowance = 0;
      this.pump();
    });
  }

  read(): string | null {
    if (this.allowance === 0) return null;
    const next = this.queue.shift();
    if (next === undefined) return null;
    this.allowance -= 1;
    return next;
  }

  setRawMode(on: boolean): this {
    this.source.setRawMode?.(on);
    return this;
  }

  setEncoding(): this {
    return this;
  }

  ref(): this {
    this.source.ref?.();
    return this;
  }

  unref(): this {
    this.source.unref?.();
    return this;
  }

  /** Stops reading the terminal, so the process can exit. */
  close(): void {
    this.source.off('data', this.onData);
    this.source.pause();
    this.queue.length = 0;
  }
}
