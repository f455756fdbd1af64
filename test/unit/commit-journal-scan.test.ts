/**
 * The journal of commits is read a megabyte at a time (scanJournal): lines that cross a piece,
 * torn last lines, zeros where a crash left them and damaged lines with whole ones after them
 * are read exactly as the whole-file reader it replaced read them (the reference below).
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { type JournalEntry, frame, readJournal } from '../../src/store/commit-journal-scan.js';

/** The whole-file reader, as it was: the answer expected of the piecewise one. */
function reference(bytes: Buffer, path: string): { entries: number[]; end: number; torn: number } | string {
  const entries: number[] = [];
  let at = 0;
  let line = 0;
  const contentEnd = (): number => {
    let last = bytes.length - 1;
    while (last >= 0 && bytes[last] === 0) last--;
    return last + 1;
  };
  while (at < bytes.length) {
    line++;
    const nl = bytes.indexOf(0x0a, at);
    const text = nl < 0 ? null : bytes.subarray(at, nl).toString('latin1');
    const m = text === null ? null : /^(\d+) ([0-9a-f]{8}) (.*)$/s.exec(text);
    let ok = m !== null && Number(m[1]) === Buffer.byteLength(m[3]!, 'latin1');
    if (ok) {
      try {
        const e = JSON.parse(Buffer.from(m![3]!, 'latin1').toString('utf8')) as JournalEntry;
        ok = frame(e).subarray(0, -1).equals(bytes.subarray(at, nl));
        if (ok) entries.push(e.n);
      } catch {
        ok = false;
      }
    }
    if (!ok) {
      const rest = nl < 0 ? Buffer.alloc(0) : bytes.subarray(nl + 1);
      if (nl < 0 || rest.every((b) => b === 0 || b === 0x0a))
        return { entries, end: at, torn: Math.max(0, contentEnd() - at) };
      return `${path} line ${line}`;
    }
    at = nl + 1;
  }
  return { entries, end: at, torn: 0 };
}

function entry(n: number, size: number): Buffer {
  return frame({ n, m: [{ op: 'appendEvent', event: { pad: 'x'.repeat(size) } } as never] });
}

/** A small deterministic generator: the same cases every run. */
function rng(seed: number): () => number {
  let s = seed;
  return () => {
    s = (s * 1103515245 + 12345) % 2 ** 31;
    return s / 2 ** 31;
  };
}

describe('reading the journal of commits a piece at a time', () => {
  it('reads what the whole-file reader read, on 60 journals of lines across pieces, torn tails and damage', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'obj-scan-'));
    const r = rng(7);
    for (let c = 0; c < 60; c++) {
      const parts: Buffer[] = [];
      const count = 1 + Math.floor(r() * 6);
      for (let n = 1; n <= count; n++) {
        // Some lines larger than a piece (1 MiB), most small.
        const size = r() < 0.3 ? Math.floor(r() * 2.5 * 1024 * 1024) : Math.floor(r() * 3000);
        parts.push(entry(n, size));
      }
      let bytes = Buffer.concat(parts);
      const kind = c % 6;
      if (kind === 1) bytes = bytes.subarray(0, bytes.length - 1 - Math.floor(r() * 50)); // torn last line
      if (kind === 2) bytes = Buffer.concat([bytes, Buffer.alloc(Math.floor(r() * 3 * 1024 * 1024))]); // zeros after
      if (kind === 3) {
        // A torn last line whose first pages never landed: zeros, then its tail, then zeros.
        const last = entry(count + 1, 5000 + Math.floor(r() * 2 * 1024 * 1024));
        last.fill(0, 0, Math.floor(last.length / 2));
        bytes = Buffer.concat([bytes, last, Buffer.alloc(4096)]);
      }
      if (kind === 4 && count > 1) {
        // A flipped byte in the first line: whole lines after it.
        bytes = Buffer.from(bytes);
        bytes[20] = bytes[20]! ^ 0x01;
      }
      if (kind === 5) bytes = Buffer.concat([bytes, Buffer.from('12 deadbeef {"n":'), Buffer.alloc(70000)]);
      const path = join(dir, `j${c}`);
      await writeFile(path, bytes);
      const want = reference(bytes, path);
      const got = await readJournal(path).then(
        (j) => ({ entries: j!.entries.map((e) => e.n), end: j!.end, torn: j!.torn }),
        (err: Error) => /line \d+/.exec(err.message) && `${path} ${/line \d+/.exec(err.message)![0]}`,
      );
      expect(got, `case ${c} (kind ${kind}, ${bytes.length} bytes)`).toEqual(want);
    }
  }, 60_000);

  it('refuses a whole entry after zero bytes on the last line: no crash writes one after pages it lost', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'obj-scan-'));
    const path = join(dir, 'j');
    await writeFile(path, Buffer.concat([entry(1, 10), Buffer.alloc(300), entry(2, 10), Buffer.alloc(4096)]));
    await expect(readJournal(path)).rejects.toThrow(
      `The store journal ${path} line 2 holds a whole entry after zero bytes, which no crash leaves (a write cut off leaves part of one entry). It was left untouched: delete the zero bytes of that line (keep the entry: it is an acknowledged commit), or restore the journal from a backup, and start again.`,
    );
  });
});
