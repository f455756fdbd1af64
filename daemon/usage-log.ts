import { type FileHandle, open, rename, rm } from 'node:fs/promises';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../src/clock.js';
import type { Config } from '../src/config.js';
import { JSON_BYTES_PER_UNIT, NUMBER_BYTES_MAX, putBytes, putJsonString, putNumber } from './json-bytes.js';
import { UsageBatch } from './usage-batch.js';

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

/** What the log asks of the daemon's registry, when a key's parts are first made. */
export interface UsageLookups {
  /** The model an instance runs; null once it is gone. */
  modelOf(instance: string): string | null;
  /** Whether a key may still be used: only such a key's parts are kept. */
  isLive(key: string): boolean;
}

/** An exchange line's parts that are the same for every line of its key, as bytes. */
interface KeyParts {
  /** `,"key":…,"instance":…,"route":` */
  head: Buffer;
  /** `,"model":…,"stream":true,"status":` */
  streamed: Buffer;
  /** `,"model":…,"stream":false,"status":` */
  plain: Buffer;
}

const ascii = (s: string): Buffer => Buffer.from(s, 'latin1');
const Z_ID = ascii('Z","id":');
const OUTCOME = ascii(',"outcome":');
const INPUT = ascii(',"input_tokens":');
const OUTPUT = ascii(',"output_tokens":');
const ESTIMATED = ascii(',"estimated_tokens":');
const MS = ascii(',"ms":');
const OUTCOME_OK = ascii(',"outcome":"ok","input_tokens":');
const OUTCOME_ERROR = ascii(',"outcome":"error","input_tokens":');
const OUTCOME_DISCONNECT = ascii(',"outcome":"disconnect","input_tokens":');
/** `{"time":"YYYY-MM-DDTHH:MM:SS.` */
const TIME_HEAD_BYTES = 29;
/** An exchange line's bytes but for its id, route and outcome strings and its key's parts. */
const LINE_FIXED =
  TIME_HEAD_BYTES +
  3 +
  Z_ID.length +
  OUTCOME.length +
  INPUT.length +
  OUTPUT.length +
  ESTIMATED.length +
  MS.length +
  6 + // the quotes of the id, the route and the outcome
  5 * NUMBER_BYTES_MAX +
  2;

/** An outcome's part with its neighbours' labels, for the outcomes there are; null for another. */
function outcomePart(outcome: string): Buffer | null {
  return outcome === 'ok'
    ? OUTCOME_OK
    : outcome === 'error'
      ? OUTCOME_ERROR
      : outcome === 'disconnect'
        ? OUTCOME_DISCONNECT
        : null;
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
  /** The batch's lines, as bytes: a line is written into it, never made a string. */
  private readonly held = new UsageBatch();
  private heldLines = 0;
  /**
   * Parts by key id, for keys still live: a key's instance and model do not change. A key's parts
   * are dropped when it is revoked (`forget`), so this holds no more keys than are live.
   */
  private readonly keyParts = new Map<string, KeyParts>();
  private timer: NodeJS.Timeout | null = null;
  /** The write under way, if any: one at a time, so lines keep their order and rotation is safe. */
  private writing: Promise<void> | null = null;
  private size: number;
  private dropped = 0;
  private failing = false;
  private closed = false;
  private second = Number.NaN;
  /** The time to the second, `YYYY-MM-DDTHH:MM:SS.`, and the line's start with it as bytes. */
  private secondText = '';
  private timeHead: Buffer = Buffer.alloc(0);

  private file: FileHandle;

  /** `opened`: the file as opened for appending, and its size then. */
  private constructor(
    private readonly settings: NonNullable<Config['usageLog']>,
    opened: { file: FileHandle; size: number },
    private readonly clock: Clock,
    private readonly log: FastifyBaseLogger,
    private readonly lookups: UsageLookups,
  ) {
    this.file = opened.file;
    this.size = opened.size;
  }

  /** Opens (or creates) the file for appending: a path that cannot be written stops the start-up. */
  static async open(
    settings: NonNullable<Config['usageLog']>,
    clock: Clock,
    log: FastifyBaseLogger,
    lookups: UsageLookups,
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
    return new UsageLog(settings, { file, size }, clock, log, lookups);
  }

  /** A request answered through a model server (or left by its client while there). */
  exchange(line: ExchangeLine): void {
    if (!this.room()) return;
    const { id, route, outcome } = line;
    const parts = this.keyParts.get(line.key) ?? this.partsOf(line.key, line.instance);
    const known = outcomePart(outcome);
    const buf = this.held.reserve(
      LINE_FIXED +
        parts.head.length +
        parts.plain.length +
        JSON_BYTES_PER_UNIT * (id.length + route.length + outcome.length),
    );
    let pos = this.putTime(buf, this.held.pos);
    pos = putJsonString(buf, pos, id);
    pos = putBytes(buf, pos, parts.head);
    pos = putJsonString(buf, pos, route);
    pos = putBytes(buf, pos, line.stream ? parts.streamed : parts.plain);
    pos = putNumber(buf, pos, line.status);
    if (known !== null) pos = putBytes(buf, pos, known);
    else pos = putBytes(buf, putJsonString(buf, putBytes(buf, pos, OUTCOME), outcome), INPUT);
    pos = putBytes(buf, putNumber(buf, pos, line.input), OUTPUT);
    pos = putBytes(buf, putNumber(buf, pos, line.output), ESTIMATED);
    pos = putBytes(buf, putNumber(buf, pos, line.estimated), MS);
    pos = putNumber(buf, pos, line.ms);
    buf[pos] = 0x7d; // }
    buf[pos + 1] = 0x0a;
    this.held.pos = pos + 2;
    this.taken();
  }

  /** A request refused by the gateway once its key was known (401 revoked, 404, 409, 429, 400, ...). */
  refused(line: RefusedLine): void {
    const { id, key, instance, route, status, code, ms } = line;
    const model = instance === null ? null : this.lookups.modelOf(instance);
    if (!this.room()) return;
    this.held.putString(
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

  /** A key revoked: its parts are kept no more. */
  forget(key: string): void {
    this.keyParts.delete(key);
  }

  /** How many keys' parts are kept; for tests. */
  get keysKept(): number {
    return this.keyParts.size;
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
    const frac = ms - this.toSecond(ms) * 1000;
    return `${this.secondText}${frac < 10 ? '00' : frac < 100 ? '0' : ''}${frac}Z`;
  }

  /** `{"time":"…","id":`, the time's milliseconds written digit by digit. */
  private putTime(buf: Buffer, at: number): number {
    const ms = Math.floor(this.clock.now());
    const frac = ms - this.toSecond(ms) * 1000;
    const pos = putBytes(buf, at, this.timeHead);
    const tens = (frac / 10) | 0;
    const hundreds = (frac / 100) | 0;
    buf[pos] = 0x30 + hundreds;
    buf[pos + 1] = 0x30 + tens - hundreds * 10;
    buf[pos + 2] = 0x30 + frac - tens * 10;
    return putBytes(buf, pos + 3, Z_ID);
  }

  /** The second of `ms`, its text made when it changes. */
  private toSecond(ms: number): number {
    const second = Math.floor(ms / 1000);
    if (second !== this.second) {
      this.second = second;
      this.secondText = new Date(second * 1000).toISOString().slice(0, 20);
      this.timeHead = ascii(`{"time":"${this.secondText}`);
    }
    return second;
  }

  /** A key's parts, kept only while the key is live and its instance known (else its model says null). */
  private partsOf(key: string, instance: string): KeyParts {
    const model = this.lookups.modelOf(instance);
    const modelPart = `,"model":${quote(model)},"stream":`;
    const parts: KeyParts = {
      head: Buffer.from(`,"key":${quote(key)},"instance":${quote(instance)},"route":`, 'utf8'),
      streamed: Buffer.from(`${modelPart}true,"status":`, 'utf8'),
      plain: Buffer.from(`${modelPart}false,"status":`, 'utf8'),
    };
    if (model !== null && this.lookups.isLive(key)) this.keyParts.set(key, parts);
    return parts;
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
    const chunk = this.held.take();
    const count = this.heldLines;
    this.heldLines = 0;
    this.writing = this.write(chunk, count).finally(() => {
      this.writing = null;
      this.held.giveBack(chunk);
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
