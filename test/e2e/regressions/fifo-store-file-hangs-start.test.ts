/**
 * A store file that is a FIFO (a careless `mkfifo`, a restore gone wrong) must refuse the start
 * with a line naming it, not hang it: opening a FIFO for reading blocks until a writer comes, and
 * the blocked open holds one of libuv's four threadpool threads for good. Before, `serve` on a
 * home whose db.json, db.json.journal or db.json.revocations was a FIFO never started and never
 * said why (killed by the guard below: signal SIGKILL).
 */
import { execFile, execFileSync } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, NODE, tmpHome } from '../../helpers/processes.js';

interface Exit {
  code: number | null;
  signal: string | null;
  stderr: string;
}

function serve(home: string): Promise<Exit> {
  return new Promise((resolve) => {
    execFile(
      NODE,
      [BIN, 'serve', '--home', home, '--port', '0'],
      { env: { ...process.env, NO_COLOR: '1' }, timeout: 20_000, killSignal: 'SIGKILL' },
      (err, _stdout, stderr) => {
        const e = err as (NodeJS.ErrnoException & { code?: number | string; signal?: string | null }) | null;
        resolve({
          code: e === null ? 0 : typeof e.code === 'number' ? e.code : null,
          signal: e?.signal ?? null,
          stderr,
        });
      },
    );
  });
}

describe('a store file that is a FIFO refuses the start', () => {
  it.each(['db.json', 'db.json.journal', 'db.json.revocations'])(
    '%s',
    async (name) => {
      const home = await tmpHome();
      execFileSync('mkfifo', [join(home, name)]);
      const r = await serve(home);
      expect(r.signal).toBeNull();
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(join(home, name));
      expect(r.stderr).toMatch(/^error: .*is not a regular file.*\n$/);
      expect((await readdir(home)).filter((f) => f.endsWith('.sock'))).toEqual([]);
    },
    30_000,
  );
});
