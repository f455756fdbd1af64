import { constants } from 'node:fs';
import { type FileHandle, open } from 'node:fs/promises';

/**
 * Files the operator names (`--tls-cert`, `--tls-key`, an instance's upstream token file,
 * `--pid-file`), read so that no such file can wedge or exhaust the daemon.
 *
 * Every file operation of Node runs on libuv's threadpool (four threads), which the store's
 * writes share. A blocking `open` of a FIFO with no writer, or any call on a mount that does not
 * answer, holds its thread until the kernel returns, perhaps never; four such reads and every
 * store write waits for ever. And `readFile` of `/dev/zero` grows without end before any size
 * check can run. So:
 * - the file is opened `O_NONBLOCK` (a FIFO opens at once instead of waiting for a writer) and
 *   judged by `fstat` of the descriptor: anything but a regular file is refused, with no read;
 * - at most `cap + 1` bytes are ever read, so the cap holds while reading;
 * - reads go one at a time through one gate per process, and a read that does not finish within
 *   `timeoutMs` is reported while its call stays in the kernel: the gate is held until that call
 *   returns, so at most one threadpool thread can ever be stuck on these files. A read asked for
 *   while the gate is held by a call past its time is refused at once, naming that file.
 *
 * Symbolic links are followed: certificates are usually links (certbot's `live/` folder, a
 * Kubernetes secret's `..data`), and the descriptor's own type is what is judged.
 */

export type OperatorFileProblem = 'unreadable' | 'not-a-file' | 'too-large' | 'no-answer' | 'busy';

export class OperatorFileError extends Error {
  constructor(
    readonly problem: OperatorFileProblem,
    /** What went wrong, as the end of a sentence that begins with the file's name. */
    readonly reason: string,
    /** The errno code, for 'unreadable'. */
    readonly code?: string,
    options?: ErrorOptions,
  ) {
    super(reason, options);
  }
}

export interface ReadOptions {
  /** The most bytes the file may hold. */
  cap: number;
}

/** The file operations the reader makes, replaceable so a test can make one never return. */
export interface ReaderFs {
  open(path: string, flags: number): Promise<FileHandle>;
}

const nodeFs: ReaderFs = { open: (path, flags) => open(path, flags) };

/** How long a read may take before it is reported: a local PEM file reads in well under 1 ms. */
export const OPERATOR_FILE_TIMEOUT_MS = 5_000;

function kindOf(st: {
  isDirectory(): boolean;
  isFIFO(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
  isSocket(): boolean;
}): string {
  if (st.isDirectory()) return 'a folder';
  if (st.isFIFO()) return 'a named pipe (FIFO)';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  return 'not a regular file';
}

async function readBounded(fs: ReaderFs, path: string, cap: number): Promise<Buffer> {
  let fh: FileHandle;
  try {
    fh = await fs.open(path, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    // open(2) of a Unix socket fails with ENXIO: say what it is rather than the errno alone.
    if (code === 'ENXIO')
      throw new OperatorFileError(
        'not-a-file',
        'is a socket or a device with nothing behind it, not a regular file',
        code,
        { cause: err },
      );
    throw new OperatorFileError('unreadable', `cannot be read (${code})`, code, { cause: err });
  }
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new OperatorFileError('not-a-file', `is ${kindOf(st)}, not a regular file`);
    if (st.size > cap) throw new OperatorFileError('too-large', `is larger than ${cap} bytes`);
    // The size can change between fstat and read (a file being rewritten): the cap is held by the
    // read itself, never more than cap + 1 bytes.
    const buf = Buffer.alloc(cap + 1);
    let got = 0;
    while (got < buf.length) {
      const { bytesRead } = await fh.read(buf, got, buf.length - got, null);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    if (got > cap) throw new OperatorFileError('too-large', `is larger than ${cap} bytes`);
    return Buffer.from(buf.subarray(0, got));
  } catch (err) {
    if (err instanceof OperatorFileError) throw err;
    const code = (err as NodeJS.ErrnoException).code ?? 'error';
    throw new OperatorFileError('unreadable', `cannot be read (${code})`, code, { cause: err });
  } finally {
    await fh.close().catch(() => {});
  }
}

interface Holder {
  path: string;
  since: number;
  deadline: number;
}

export class OperatorFileReader {
  /** The read that holds the gate: set while its calls are in the kernel, past its time or not. */
  private holder: Holder | null = null;
  private tail: Promise<void> = Promise.resolve();

  constructor(
    private readonly timeoutMs = OPERATOR_FILE_TIMEOUT_MS,
    private readonly fs: ReaderFs = nodeFs,
    private readonly now: () => number = () => performance.now(),
  ) {}

  /** The file's bytes, or an OperatorFileError whose reason completes "<the file> …". */
  read(path: string, opts: ReadOptions): Promise<Buffer> {
    const stuck = this.holder;
    if (stuck !== null && this.now() > stuck.deadline) return Promise.reject(this.busy(stuck));

    const prev = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((r) => (release = r));
    let abandoned = false;
    let mine: Holder | null = null;
    const work = prev.then(async () => {
      if (abandoned) {
        release();
        return null;
      }
      const since = this.now();
      mine = { path, since, deadline: since + this.timeoutMs };
      this.holder = mine;
      try {
        return await readBounded(this.fs, path, opts.cap);
      } finally {
        this.holder = null;
        release();
      }
    });

    return new Promise<Buffer>((resolve, reject) => {
      const timer = setTimeout(() => {
        abandoned = true;
        const holder = this.holder;
        if (holder === null || holder === mine) {
          reject(
            new OperatorFileError(
              'no-answer',
              `did not answer within ${this.timeoutMs / 1000} s (is it on a mount that does not answer?)`,
            ),
          );
        } else reject(this.busy(holder));
      }, this.timeoutMs);
      work.then(
        (buf) => {
          clearTimeout(timer);
          if (buf !== null) resolve(buf);
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err as Error);
        },
      );
    });
  }

  private busy(holder: Holder): OperatorFileError {
    const secs = Math.round((this.now() - holder.since) / 1000);
    return new OperatorFileError(
      'busy',
      `was not read: the read of ${holder.path}, begun ${secs} s ago, has not returned (is it on a mount that does not answer?). Files named to ob-proxy are read one at a time; fix that path, or restart the daemon`,
    );
  }
}

/** The one gate of this process: the threadpool it protects is the process's. */
export const operatorFiles = new OperatorFileReader();
