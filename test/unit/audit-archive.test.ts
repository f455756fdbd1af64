/**
 * The audit archive appends, in pieces, exactly the events it does not hold yet: those numbered
 * above both what db.json says was archived and the archive's own last line.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { AuditEvent } from '../../src/domain/key.js';
import { AuditArchive } from '../../src/store/audit-archive.js';

let dir: string | undefined;
afterEach(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

function events(from: number, to: number): AuditEvent[] {
  const out: AuditEvent[] = [];
  for (let seq = from; seq <= to; seq++)
    out.push({
      seq,
      at: '2026-11-01T00:00:00.000Z',
      type: 'key.created',
      instance: 'gpu-1',
      keyId: `k${seq}`,
    } as AuditEvent);
  return out;
}

async function seqs(path: string): Promise<number[]> {
  return (await readFile(path, 'utf8'))
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => (JSON.parse(l) as AuditEvent).seq);
}

it('appends the events after the last one held, over several pieces, and none twice', async () => {
  dir = await mkdtemp(join(tmpdir(), 'obarchive-'));
  const archive = new AuditArchive(join(dir, 'db.json.audit'));
  expect(await archive.append(events(1, 4_500), 1_000)).toBe(4_500);
  const first = await seqs(archive.path);
  expect(first).toHaveLength(3_500);
  expect(first[0]).toBe(1_001);
  expect(first.every((s, i) => s === 1_001 + i)).toBe(true);

  // The same events again (a crash before db.json was written): the archive's last line says 4,500.
  expect(await archive.append(events(1, 4_500), 0)).toBe(4_500);
  expect(await seqs(archive.path)).toEqual(first);

  // Newer ones follow on; held through a number past them all, nothing is added.
  expect(await archive.append(events(4_000, 7_000), 1_000)).toBe(7_000);
  const second = await seqs(archive.path);
  expect(second).toHaveLength(6_000);
  expect(second.every((s, i) => s === 1_001 + i)).toBe(true);
  expect(await archive.append(events(1, 7_000), 9_000)).toBe(9_000);
  expect(await seqs(archive.path)).toEqual(second);
});
