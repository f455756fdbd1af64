/**
 * The store file's writer (src/store/atomic-json-file.ts): whole files only, mode 0600, no link
 * followed at either path, a crash's leftover temp file replaced, a failed write leaving the old
 * file and no temp file. The daemon-level cases (a link at db.json.tmp at start-up and while
 * serving) are in test/e2e/store-files.test.ts.
 */
import { lstat, mkdir, mkdtemp, readFile, readdir, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeEach, expect, it } from 'vitest';
import { AtomicJsonFile, UnsafeStorePathError } from '../../src/store/atomic-json-file.js';

let dir: string;
let path: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'oba-'));
  path = join(dir, 'db.json');
});

it('reads null where no file is, then what it wrote, as the whole file, mode 0600, no temp file left', async () => {
  const file = new AtomicJsonFile<{ a: number[] }>(path);
  expect(await file.read()).toBeNull();
  await file.write({ a: [1, 2] });
  expect(await readFile(path, 'utf8')).toBe('{\n "a": [\n  1,\n  2\n ]\n}');
  expect((await stat(path)).mode & 0o777).toBe(0o600);
  expect(await file.read()).toEqual({ a: [1, 2] });
  await file.write({ a: [] });
  expect(await file.read()).toEqual({ a: [] });
  expect(await readdir(dir)).toEqual(['db.json']);
});

it('writes a file from pieces, sync or async', async () => {
  const file = new AtomicJsonFile<unknown>(path);
  await file.writeChunks(['{"x":', '"é', '"}']);
  expect(await file.read()).toEqual({ x: 'é' });
  await file.writeChunks(
    (async function* () {
      yield '[1,';
      yield '2]';
    })(),
  );
  expect(await file.read()).toEqual([1, 2]);
});

it('a failed write leaves the old file whole and no temp file', async () => {
  const file = new AtomicJsonFile<unknown>(path);
  await file.write({ kept: true });
  await expect(
    file.writeChunks(
      (function* () {
        yield '{"half":';
        throw new Error('serialising failed');
      })(),
    ),
  ).rejects.toThrow('serialising failed');
  expect(await file.read()).toEqual({ kept: true });
  expect(await readdir(dir)).toEqual(['db.json']);
});

it('a regular temp file left by a crash is replaced', async () => {
  await writeFile(`${path}.tmp`, '{"half":');
  const file = new AtomicJsonFile<unknown>(path);
  expect(await file.read()).toBeNull();
  await file.write({ ok: 1 });
  expect(await file.read()).toEqual({ ok: 1 });
  expect(await readdir(dir)).toEqual(['db.json']);
});

it('a link at the temp path is refused, read or write, and its target is untouched', async () => {
  const target = join(dir, 'victim');
  await writeFile(target, 'precious');
  await symlink(target, `${path}.tmp`);
  const file = new AtomicJsonFile<unknown>(path);
  const message = `${path}.tmp exists and is a symbolic link; ob-proxy writes its temp file there and never follows or replaces such a thing. Remove it (rm ${path}.tmp) and try again.`;
  await expect(file.read()).rejects.toThrow(new UnsafeStorePathError(message));
  await expect(file.write({ x: 1 })).rejects.toThrow(new UnsafeStorePathError(message));
  expect(await readFile(target, 'utf8')).toBe('precious');
  expect(await lstat(path).catch(() => null)).toBeNull();
});

it('a store path that is a link, or a folder, is refused, and the link is not replaced', async () => {
  const target = join(dir, 'real.json');
  await writeFile(target, '{"real":true}');
  await symlink(target, path);
  const file = new AtomicJsonFile<unknown>(path);
  await expect(file.read()).rejects.toThrow(`${path} is a symbolic link (to ${target}).`);
  await expect(file.write({ x: 1 })).rejects.toMatchObject({
    code: 'EUNSAFEPATH',
    message: expect.stringContaining(`${path} is a symbolic link (to ${target})`),
  });
  expect((await lstat(path)).isSymbolicLink()).toBe(true);
  expect(await readFile(target, 'utf8')).toBe('{"real":true}');
  expect((await readdir(dir)).sort()).toEqual(['db.json', 'real.json']);

  const folder = join(dir, 'folder.json');
  await mkdir(folder);
  await expect(new AtomicJsonFile<unknown>(folder).read()).rejects.toThrow(
    `${folder} is not a regular file. Point --store at the store file.`,
  );
  await expect(new AtomicJsonFile<unknown>(folder).write({})).rejects.toThrow(
    `${folder} is not a regular file; nothing was written.`,
  );
});
