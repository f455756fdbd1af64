import { type FileHandle, open, rename, rm } from 'node:fs/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../src/clock.js';
import type { Config } from '../src/config.js';

/** A string that JSON writes as it is (ids, paths, model names), else with JSON.stringify's escapes. */
function quote(s: string | null): string {
  if (s === null) return 'null';
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || c === 0x22 || c === 0x5c || c > 0x7e) return JSON.stringify(s);
  }
  return `"${s}"`;
}

/** What a line says of a request answered through a model server: ids, names and numbers only. */
export interface ExchangeLine {
  id: string;
  key: string;
  instance: string;
  /** The path as the client called it, without its query. */
  route: string;
  stream: boolean;
  status: number;
  outcome: string;
  input: number;
  output: number;
  estimated: number;
  ms: number;
}

/** What a line says of a request the gateway refused once the key was known. */
export interface RefusedLine {
  id: string;
  key: string;
  instance: string | null;
  route: string;
  status: number;
  /** The error's stable code (docs/errors.md). */
  code: string;
  ms: number;
}

/** Lines are written this long after the first one of a batch, or at once past FLUSH_LINES (about 64 KiB). */
const FLUSH_MS = 1_000;
const FLUSH_LINES = 200;
/**
 * Lines held while the disk is slow or the file cannot be written (about 8 MiB). Past this, new
 * lines are dropped and counted, so a stalled disk costs memory up to here and never a request.
 */
const HELD_LINES_MAX = 25_000;

/**
 * The per-request usage log for billing systems (`--usage-log`): one JSON line per request
 * whose key is known, appended to a file rotated by size.
 *
 * The request path only formats a line and keeps it in memory; the writes happen later, one at a
 * time, off that path. A full or failing disk loses lines, never requests: the failed batch is
 * dropped and counted, a warning says so once, and the next batch tries again. A line never holds
 * a secret nor a prompt: ids, names, numbers.
 */
export class UsageLog {
  /** The batch's lines as parts, joined once when written: a line is never a chain of partial strings. */
  private held: string[] = [];
  private heldLines = 0;
  /** `,"key":…,"instance":…,"model":…` by key id: a key's instance and model do not change. */
  private readonly keyParts = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;
  /** The write under way, if any: one at a time, so lines keep their order and rotation is safe. */
  private writing: Promise<void> | null = null;
  private size: number;
  private dropped = 0;
  private failing = false;
  private closed = false;
  private second = Number.NaN;
  private secondText = '';

  private file: FileHandle;

  /** `opened`: the file as opened for appending, and its size then. */
  private constructor(
    private readonly settings: NonNullable<Config['usageLog']>,
    opened: { file: FileHandle; size: number },
    private readonly clock: Clock,
    private readonly log: FastifyBaseLogger,
    /** The model an instance runs, read only when a line is written; null once it is gone. */
    private readonly modelOf: (instance: string) => string | null,
  ) {
    this.file = opened.file;
    this.size = opened.size;
  }

  /** Opens (or creates) the file for appending: a path that cannot be written stops the start-up. */
  static async open(
    settings: NonNullable<Config['usageLog']>,
    clock: Clock,
    log: FastifyBaseLogger,
    modelOf: (instance: string) => string | null,
  ): Promise<UsageLog> {
    let file: FileHandle;
    try {
      file = await open(settings.path, 'a', 0o600);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      throw new Error(
        `Cannot open --usage-log (OB_PROXY_USAGE_LOG) ${settings.path} for appending (${e.code ?? e.message}): give a file in a folder the daemon may write.`,
        { cause: err },
      );
    }
    const { size } = await file.stat();
    return new UsageLog(settings, { file, size }, clock, log, modelOf);
  }

  /** A request answered through a model server (or left by its client while there). */
  exchange(line: ExchangeLine): void {
    if (!this.room()) return;
    this.held.push(
      '{"time":"',
      this.time(),
      '","id":',
      quote(line.id),
      this.keyPart(line.key, line.instance),
      ',"route":',
      quote(line.route),
      line.stream ? ',"stream":true,"status":' : ',"stream":false,"status":',
      String(line.status),
      ',"outcome":"',
      line.outcome,
      '","input_tokens":',
      String(line.input),
      ',"output_tokens":',
      String(line.output),
      ',"estimated_tokens":',
      String(line.estimated),
      ',"ms":',
      String(line.ms),
      '}\n',
    );
    this.taken();
  }

  /** A request refused by the gateway once its key was known (401 revoked, 404, 409, 429, 400, ...). */
  refused(line: RefusedLine): void {
    const { id, key, instance, route, status, code, ms } = line;
    const model = instance === null ? null : this.modelOf(instance);
    if (!this.room()) return;
    this.held.push(
      `{"time":"${this.time()}","id":${quote(id)},"key":${quote(key)},"instance":${quote(instance)},"route":${quote(route)},"model":${quote(model)},"stream":null,"status":${status},"outcome":"refused","error":${quote(code)},"input_tokens":0,"output_tokens":0,"estimated_tokens":0,"ms":${ms}}\n`,
    );
    this.taken();
  }

  /** Every line taken so far, written (or dropped and counted); for shutdown and tests. */
  async flush(): Promise<void> {
    while (this.writing !== null || this.heldLines > 0) {
      if (this.writing === null) this.writeHeld();
      await this.writing;
    }
  }

  /** Flushes and closes the file; lines after this are dropped. */
  async close(): Promise<void> {
    await this.flush();
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    await this.file.close().catch(() => {});
    if (this.dropped > 0) this.log.warn({ lost: this.dropped }, 'usage log: lines were lost (disk full or failing)');
  }

  /**
   * ISO 8601 in UTC, its date and time to the second made once a second: toISOString on every
   * request cost more than the rest of the line.
   */
  private time(): string {
    const ms = Math.floor(this.clock.now());
    const second = Math.floor(ms / 1000);
    if (second !== this.second) {
      this.second = second;
      this.secondText = new Date(second * 1000).toISOString().slice(0, 20);
    }
    const frac = ms - second * 1000;
    return `${this.secondText}${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}Z`;
  }

  private keyPart(key: string, instance: string): string {
    let part = this.keyParts.get(key);
    if (part === undefined) {
      const model = this.modelOf(instance);
      part = `,"key":${quote(key)},"instance":${quote(instance)},"model":${quote(model)}`;
      // Kept only once the instance is known: a line for a key whose instance is gone says null.
      if (model !== null) this.keyParts.set(key, part);
    }
    return part;
  }

  /** Whether a line may be held; a line that may not is counted lost. */
  private room(): boolean {
    if (!this.closed && this.heldLines < HELD_LINES_MAX) return true;
    this.lost(1, null);
    return false;
  }

  /** A line was pushed: its batch is written at once if large, else when its time comes. */
  private taken(): void {
    this.heldLines += 1;
    if (this.heldLines >= FLUSH_LINES) {
      if (this.writing === null) this.writeHeld();
    } else if (this.timer === null) this.arm();
  }

  /** The batch is written FLUSH_MS from now, or when the write under way ends if it is later. */
  private arm(): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.writing === null) this.writeHeld();
    }, FLUSH_MS);
    this.timer.unref();
  }

  /** Takes the held lines and writes them, after rotating if they would take the file past its size. */
  private writeHeld(): void {
    if (this.heldLines === 0) return;
    const parts = this.held;
    const count = this.heldLines;
    this.held = [];
    this.heldLines = 0;
    const chunk = Buffer.from(parts.join(''), 'utf8');
    this.writing = this.write(chunk, count).finally(() => {
      this.writing = null;
      // Lines that came while writing: the next batch, at once if it is already large, else
      // when its time comes (a timer that fired during the write did nothing).
      if (this.closed || this.heldLines === 0) return;
      if (this.heldLines >= FLUSH_LINES) this.writeHeld();
      else if (this.timer === null) this.arm();
    });
  }

  private async write(chunk: Buffer, count: number): Promise<void> {
    try {
      if (this.size > 0 && this.size + chunk.length > this.settings.maxBytes) await this.rotate();
      const { bytesWritten } = await this.file.write(chunk, 0, chunk.length, null);
      this.size += bytesWritten;
      if (bytesWritten < chunk.length) throw new Error(`short write (${bytesWritten} of ${chunk.length} bytes)`);
      if (this.failing) {
        this.failing = false;
        this.log.warn({ lost: this.dropped }, 'usage log: writing again');
      }
    } catch (err) {
      this.lost(count, err as Error);
    }
  }

  /**
   * `<file>` becomes `<file>.1`, each `.n` becomes `.n+1`, the one past --usage-log-files is
   * deleted. Renamed while still open (the handle follows its file), so a rename or an open that
   * fails leaves the log writing where it was.
   */
  private async rotate(): Promise<void> {
    const { path, files } = this.settings;
    await rm(`${path}.${files}`, { force: true });
    for (let n = files - 1; n >= 1; n--) {
      await rename(`${path}.${n}`, `${path}.${n + 1}`).catch((err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT') throw err;
      });
    }
    await rename(path, `${path}.1`);
    const next = await open(path, 'a', 0o600);
    const old = this.file;
    this.file = next;
    this.size = 0;
    await old.close().catch(() => {});
  }

  private lost(count: number, err: Error | null): void {
    this.dropped += count;
    if (this.failing) return;
    this.failing = true;
    this.log.warn(
      { lost: count, err: err?.message ?? 'more lines held than --usage-log can take while the disk is slow' },
      'usage log: lines dropped; requests are served as before',
    );
  }
}
