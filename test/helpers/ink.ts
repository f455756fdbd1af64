/**
 * A small in-repo Ink test renderer (ink-testing-library 4 trails Ink 8 / React 19).
 *
 * - FakeStdout is a TTY of a given size; Ink runs in debug mode, so every render is written whole
 *   as one `write`, and each write is one frame. Pure control sequences (cursor show/hide) and
 *   OSC 52 clipboard writes are kept apart from frames.
 * - FakeStdin is a raw-mode TTY that Ink reads through 'readable'/read(), as it reads a terminal.
 * - Waits poll (setImmediate, then short timeouts) until a frame matches: no fixed sleeps.
 */
import { EventEmitter } from 'node:events';
import type { ReactElement } from 'react';
import { render } from 'ink';

// eslint-disable-next-line no-control-regex
const ANSI = /\u001b\[[0-9;?]*[ -/]*[@-~]|\u001b\][^\u0007\u001b]*(?:\u0007|\u001b\\)/g;
// eslint-disable-next-line no-control-regex
const ONLY_CONTROL = /^(?:\u001b\[[0-9;?]*[ -/]*[@-~])+$/;
const OSC52 = '\u001b]52;';

export function stripAnsi(s: string): string {
  return s.replace(ANSI, '');
}

export class FakeStdout extends EventEmitter {
  readonly isTTY = true;
  /** Raw frames, in order, as Ink wrote them (colours included). */
  readonly rawFrames: string[] = [];
  /** Every OSC 52 clipboard write. */
  readonly clipboard: string[] = [];
  readonly control: string[] = [];

  constructor(
    public columns: number,
    public rows: number,
  ) {
    super();
  }

  write = (chunk: string | Uint8Array, encodingOrCb?: unknown, cb?: unknown): boolean => {
    const s = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8');
    if (s.startsWith(OSC52)) this.clipboard.push(s);
    else if (s === '' || ONLY_CONTROL.test(s)) this.control.push(s);
    else this.rawFrames.push(s);
    const done = typeof encodingOrCb === 'function' ? encodingOrCb : cb;
    if (typeof done === 'function') (done as () => void)();
    return true;
  };

  resize(columns: number, rows: number): void {
    this.columns = columns;
    this.rows = rows;
    this.emit('resize');
  }
}

export class FakeStdin extends EventEmitter {
  readonly isTTY = true;
  isRaw = false;
  private readonly queue: string[] = [];

  setRawMode(on: boolean): this {
    this.isRaw = on;
    return this;
  }
  setEncoding(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  unref(): this {
    return this;
  }
  pause(): this {
    return this;
  }
  resume(): this {
    return this;
  }

  read(): string | null {
    return this.queue.shift() ?? null;
  }

  /** What a terminal sends for one key press or paste. */
  send(data: string): void {
    this.queue.push(data);
    this.emit('data', data);
    this.emit('readable');
  }
}

/** Key names to the bytes a terminal sends for them. */
export const KEYS = {
  enter: '\r',
  escape: '\u001b',
  tab: '\t',
  shiftTab: '\u001b[Z',
  up: '\u001b[A',
  down: '\u001b[B',
  right: '\u001b[C',
  left: '\u001b[D',
  backspace: '\u007f',
  delete: '\u001b[3~',
  home: '\u001b[H',
  end: '\u001b[F',
  pageUp: '\u001b[5~',
  pageDown: '\u001b[6~',
  ctrlC: '\u0003',
} as const;
export type KeyName = keyof typeof KEYS;

export type FrameMatch = string | RegExp | ((frame: string) => boolean);

function matches(frame: string, m: FrameMatch): boolean {
  if (typeof m === 'string') return frame.includes(m);
  if (m instanceof RegExp) return m.test(frame);
  return m(frame);
}

function tick(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

export interface RenderedInk {
  stdout: FakeStdout;
  stdin: FakeStdin;
  /** Frames with ANSI removed, in order. */
  frames(): string[];
  lastFrame(): string;
  /** Sends one key (by name) or literal text, then lets React and Ink settle. */
  press(key: KeyName | string): Promise<void>;
  /** Types text one character at a time, as a person does. */
  type(text: string): Promise<void>;
  /** Polls until the last frame matches; throws with that frame when it does not in time. */
  waitForFrame(match: FrameMatch, timeoutMs?: number): Promise<string>;
  resize(columns: number, rows: number): Promise<void>;
  /** Settles when the app exits (useApp().exit()) or is unmounted. */
  exited: Promise<void>;
  unmount(): Promise<void>;
}

export interface RenderInkOptions {
  columns?: number;
  rows?: number;
  /** Puts a stream between the fake terminal and Ink, as the app does with its real stdin. */
  input?: (terminal: FakeStdin) => unknown;
}

export function renderInk(tree: ReactElement, options: RenderInkOptions = {}): RenderedInk {
  const size = { columns: options.columns ?? 80, rows: options.rows ?? 24 };
  const stdout = new FakeStdout(size.columns, size.rows);
  const stdin = new FakeStdin();
  const stderr = new FakeStdout(size.columns, size.rows);
  const instance = render(tree, {
    stdout: stdout as unknown as NodeJS.WriteStream,
    stdin: (options.input === undefined ? stdin : options.input(stdin)) as NodeJS.ReadStream,
    stderr: stderr as unknown as NodeJS.WriteStream,
    debug: true,
    interactive: true,
    exitOnCtrlC: false,
    patchConsole: false,
  });
  const frames = (): string[] => stdout.rawFrames.map(stripAnsi);
  const lastFrame = (): string => stripAnsi(stdout.rawFrames.at(-1) ?? '');

  async function settle(): Promise<void> {
    await tick();
    await new Promise((r) => setTimeout(r, 0));
    await tick();
  }

  async function waitForFrame(match: FrameMatch, timeoutMs = 4_000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const f = lastFrame();
      if (matches(f, match)) return f;
      if (Date.now() > deadline) {
        throw new Error(`no frame matched ${String(match)} within ${timeoutMs} ms; last frame:\n${f}`);
      }
      await tick();
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  const exited = instance.waitUntilExit().then(
    () => {},
    () => {},
  );

  return {
    stdout,
    stdin,
    frames,
    lastFrame,
    waitForFrame,
    exited,
    async press(key) {
      // A frame is written at commit, but React subscribes new input handlers in passive effects
      // just after it: let those run first, as any human reaction time does.
      await settle();
      stdin.send(key in KEYS ? KEYS[key as KeyName] : key);
      // A lone ESC is held by Ink's parser (20 ms) in case a sequence follows.
      if (key === 'escape') await new Promise((r) => setTimeout(r, 30));
      await settle();
    },
    async type(text) {
      for (const ch of text) {
        await settle();
        stdin.send(ch);
        await settle();
      }
    },
    async resize(columns, rows) {
      stdout.resize(columns, rows);
      await settle();
    },
    async unmount() {
      instance.unmount();
      await exited;
    },
  };
}
