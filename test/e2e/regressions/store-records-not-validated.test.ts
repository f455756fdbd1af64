/**
 * Regression (Hand edits): records were used as found. `instances:[null]` stopped
 * the daemon with a bare TypeError, and `packEndsAt:"garbage"` was accepted: the pack timer
 * re-armed every millisecond (Date.parse gives NaN) and the pack never ended. Now every record is
 * checked on load: `serve` refuses to start, naming the record and the field and saying how to
 * fix it, and leaves the file as it was. (Every field: test/unit/store-validation.test.ts.)
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { runCli, tmpHome } from '../../helpers/processes.js';
import { writeStore } from '../../helpers/store-home.js';

const instance = {
  id: 'gpu-1',
  deployment: 'd-1',
  model: 'gemma4:26b',
  endpoint: 'http://127.0.0.1:9',
  state: 'ready',
  packEndsAt: null,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
};

async function serveOn(data: unknown): Promise<{ code: number; stderr: string; before: string; after: string }> {
  const home = await tmpHome();
  await writeStore(home, data);
  const before = await readFile(join(home, 'db.json'), 'utf8');
  const r = await runCli(['serve', '--port', '0'], { home });
  return { code: r.code, stderr: r.stderr, before, after: await readFile(join(home, 'db.json'), 'utf8') };
}

it('instances:[null] is refused naming the record, not a bare TypeError', async () => {
  const r = await serveOn({ version: 2, instances: [null], keys: [], events: [] });
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(
    /has a record ob-proxy cannot use: instances\[0\]: expected an object, found null\. The file was left untouched\. Fix that record by hand/,
  );
  expect(r.stderr).not.toContain('TypeError');
  expect(r.after).toBe(r.before);
});

it('a packEndsAt that is not a time is refused naming the instance and the field, not a busy pack timer', async () => {
  const r = await serveOn({ version: 2, instances: [{ ...instance, packEndsAt: 'garbage' }], keys: [], events: [] });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain('instances[0] (id "gpu-1"), field "packEndsAt": expected an ISO 8601 time with a zone');
  expect(r.after).toBe(r.before);
});

it('a key record with an unknown status is refused naming the key and the field', async () => {
  const key = {
    id: 'AAAAAAAAAAAA',
    name: 'k',
    instance: 'gpu-1',
    deployment: 'd-1',
    hash: 'a'.repeat(64),
    hint: 'ob_sk_…AAAA',
    isDefault: false,
    status: 'enabled',
    createdAt: '2026-01-01T00:00:00.000Z',
    lastUsedAt: null,
    revokedAt: null,
    revokeReason: null,
    usage: { requests: 0, promptTokens: 0, completionTokens: 0 },
  };
  const r = await serveOn({ version: 2, instances: [instance], keys: [key], events: [] });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(
    'keys[0] (id "AAAAAAAAAAAA"), field "status": expected one of active, revoked, found "enabled"',
  );
  expect(r.after).toBe(r.before);
});
