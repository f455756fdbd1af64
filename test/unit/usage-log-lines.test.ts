/**
 * The usage log's lines byte for byte (daemon/usage-log.ts): written straight into bytes, each is
 * what JSON.stringify makes of its fields in the documented order, whatever the strings and
 * numbers hold; and the parts kept by key are those of live keys only.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type ExchangeLine, UsageLog } from '../../daemon/usage-log.js';

const T0 = Date.UTC(2026, 10, 23, 12, 0, 0);
const silent = { warn: () => {} } as unknown as FastifyBaseLogger;

let dir: string;
let path: string;
let now: number;
const live = new Set<string>();
const models = new Map<string, string>();

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'obul-'));
  path = join(dir, 'usage.jsonl');
  now = T0;
  live.clear();
  models.clear();
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function openLog(): Promise<UsageLog> {
  return UsageLog.open({ path, maxBytes: 1024 * 1024 * 1024, files: 1 }, { now: () => now }, silent, {
    modelOf: (i) => models.get(i) ?? null,
    isLive: (k) => live.has(k),
  });
}

/** The line JSON.stringify makes, fields in the order of docs/operations.md. */
function expected(line: ExchangeLine, time: string, model: string | null): string {
  return `${JSON.stringify({
    time,
    id: line.id,
    key: line.key,
    instance: line.instance,
    route: line.route,
    model,
    stream: line.stream,
    status: line.status,
    outcome: line.outcome,
    input_tokens: line.input,
    output_tokens: line.output,
    estimated_tokens: line.estimated,
    ms: line.ms,
  })}\n`;
}

const plain: ExchangeLine = {
  id: 'req_V1StGXR8Z5jdHi6B',
  key: '3fA9kQ2mXz1B',
  instance: 'gpu-1',
  route: '/v1/chat/completions',
  stream: false,
  status: 200,
  outcome: 'ok',
  input: 42,
  output: 311,
  estimated: 0,
  ms: 812,
};

describe('a usage line', () => {
  it('is JSON.stringify of its fields, for plain and unusual strings and numbers alike', async () => {
    models.set('gpu-1', 'gemma4:26b');
    models.set('gpü "2"', 'modèle\\x');
    live.add(plain.key);
    live.add('k\u2028ey');
    const log = await openLog();
    const lines: [ExchangeLine, number, string | null][] = [
      [plain, T0, 'gemma4:26b'],
      [{ ...plain, stream: true, outcome: 'disconnect', input: 0, output: 1_000_000_000, ms: 9 }, T0 + 7, 'gemma4:26b'],
      [
        { ...plain, key: 'k2', outcome: 'error', status: 502, input: 2_147_483_647, estimated: 10, ms: 1_234 },
        T0 + 1_050,
        null,
      ],
      [
        {
          ...plain,
          id: 'req_"quoted"\\\n\u0001\u007f',
          key: 'k\u2028ey',
          instance: 'gpü "2"',
          route: '/v1/é\ud83d\ude00/\ud800',
          outcome: 'some "other"',
          input: 2_147_483_648,
          output: -3,
          estimated: 1.5,
          ms: -0,
        },
        T0 + 999,
        'modèle\\x',
      ],
      [{ ...plain, key: 'k3', instance: 'gone', input: 1e21, output: Number.MAX_VALUE, ms: 5e-324 }, T0 + 61_000, null],
      [{ ...plain, id: 'x'.repeat(300_000) }, T0 + 61_001, 'gemma4:26b'],
    ];
    let text = '';
    for (const [line, at, model] of lines) {
      now = at;
      // A model read when the line is: one for an instance not (or no longer) known is null.
      if (model === null && line.instance === 'gpu-1') models.delete('gpu-1');
      log.exchange(line);
      if (model === null && line.instance === 'gpu-1') models.set('gpu-1', 'gemma4:26b');
      text += expected(line, new Date(at).toISOString(), model);
    }
    await log.close();
    expect(await readFile(path, 'utf8')).toBe(text);
  });

  it('a batch that outgrows its chunk while a write is held is written whole, in order', async () => {
    models.set('gpu-1', 'gemma4:26b');
    const log = await openLog();
    let text = '';
    // About 700 bytes a line: 1,000 lines take several chunks.
    for (let i = 0; i < 1_000; i++) {
      const line = { ...plain, id: `req_${i}_${'y'.repeat(600)}`, input: i };
      log.exchange(line);
      text += expected(line, new Date(T0).toISOString(), 'gemma4:26b');
    }
    await log.close();
    expect(await readFile(path, 'utf8')).toBe(text);
  });
});

describe('the parts kept by key', () => {
  it('are those of live keys: a revoked key’s are dropped, and not kept again by a late line', async () => {
    models.set('gpu-1', 'gemma4:26b');
    live.add('a').add('b');
    const log = await openLog();
    log.exchange({ ...plain, key: 'a' });
    log.exchange({ ...plain, key: 'b' });
    log.exchange({ ...plain, key: 'a' });
    expect(log.keysKept).toBe(2);
    live.delete('a');
    log.forget('a');
    expect(log.keysKept).toBe(1);
    // An exchange of the revoked key that ends after its revocation still writes its line.
    log.exchange({ ...plain, key: 'a' });
    expect(log.keysKept).toBe(1);
    await log.close();
    const keys = (await readFile(path, 'utf8'))
      .trimEnd()
      .split('\n')
      .map((l) => (JSON.parse(l) as { key: string }).key);
    expect(keys).toEqual(['a', 'b', 'a', 'a']);
  });
});
