/**
 * --usage-log: one JSON line per request whose key is known, for billing systems. Plain and
 * streamed exchanges carry the tokens the model server reported (the ones the key is charged);
 * refusals after the key is known carry their status and code; an unknown key writes nothing.
 * No line holds a secret or a prompt. The file is rotated by size, keeping --usage-log-files,
 * and a disk that refuses every write (/dev/full) loses lines, never a request.
 */
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import type { Config } from '../../src/config.js';
import { type Inproc, MODEL, T0, buildInproc, chatRequests, startSim } from '../helpers/inproc.js';

type Line = Record<string, unknown>;

let dir: string;
let sim: Simulator;
let simUrl: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'obu-'));
  ({ sim, url: simUrl } = await startSim());
});

afterAll(async () => {
  await sim?.close();
  await rm(dir, { recursive: true, force: true });
});

/** A daemon with its log at `path`, an instance ready on the simulator, and its default key. */
async function daemonWithLog(
  usageLog: Config['usageLog'],
): Promise<{ d: Inproc; key: { id: string; secret: string } }> {
  const d = await buildInproc({ usageLog });
  expect((await d.manage('POST', '/v1/instances', { id: 'gpu-1', model: MODEL, endpoint: simUrl })).status).toBe(201);
  const ready = await d.manage('POST', '/v1/instances/gpu-1/ready', { probe: false });
  return { d, key: (ready.json as { defaultKey: { id: string; secret: string } }).defaultKey };
}

async function linesOf(path: string): Promise<Line[]> {
  const text = await readFile(path, 'utf8');
  expect(text.endsWith('\n')).toBe(true);
  return text
    .slice(0, -1)
    .split('\n')
    .map((l) => JSON.parse(l) as Line);
}

/** The duration is the machine's: a number, not asserted further. */
function timed(line: Line): Line {
  expect(typeof line.ms).toBe('number');
  return { ...line, ms: 'ms' };
}

describe('the usage log', () => {
  let d: Inproc;
  let key: { id: string; secret: string };
  const path = () => join(dir, 'usage.jsonl');

  beforeAll(async () => {
    ({ d, key } = await daemonWithLog({ path: path(), maxBytes: 1024 * 1024, files: 2 }));
  });

  afterAll(async () => {
    await d?.close();
  });

  it('a line for a plain, a streamed and a refused request; none for an unknown key', async () => {
    const plain = await d.chat(key.secret, { model: MODEL, messages: [{ role: 'user', content: 'the plain prompt' }] });
    expect(plain.status).toBe(200);
    const plainUsage = (plain.json as { usage: { prompt_tokens: number; completion_tokens: number } }).usage;
    const streamed = await d.chat(key.secret, {
      model: MODEL,
      stream: true,
      stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'the streamed prompt' }],
    });
    expect(streamed.status).toBe(200);
    const events = streamed.text
      .split('\n\n')
      .filter((e) => e.startsWith('data: {'))
      .map((e) => JSON.parse(e.slice(6)) as { usage?: { prompt_tokens: number; completion_tokens: number } | null });
    const streamUsage = events.at(-1)!.usage!;
    const wrongModel = await d.chat(key.secret, { model: 'qwen3.6:27b', messages: [{ role: 'user', content: 'x' }] });
    expect(wrongModel.status).toBe(400);
    const unknown = await d.chat(`ob_sk_${'A'.repeat(12)}_${'b'.repeat(43)}`, { model: MODEL, messages: [] });
    expect(unknown.status).toBe(401);
    expect(chatRequests(sim)).toHaveLength(2);

    await d.daemon.ctx.usageLog!.flush();
    const time = new Date(T0).toISOString();
    const common = { time, key: key.id, instance: 'gpu-1', route: '/v1/chat/completions', model: MODEL };
    expect((await linesOf(path())).map(timed)).toEqual([
      {
        ...common,
        id: plain.headers['x-request-id'],
        stream: false,
        status: 200,
        outcome: 'ok',
        input_tokens: plainUsage.prompt_tokens,
        output_tokens: plainUsage.completion_tokens,
        estimated_tokens: 0,
        ms: 'ms',
      },
      {
        ...common,
        id: streamed.headers['x-request-id'],
        stream: true,
        status: 200,
        outcome: 'ok',
        input_tokens: streamUsage.prompt_tokens,
        output_tokens: streamUsage.completion_tokens,
        estimated_tokens: 0,
        ms: 'ms',
      },
      {
        ...common,
        id: wrongModel.headers['x-request-id'],
        stream: null,
        status: 400,
        outcome: 'refused',
        error: 'model_mismatch',
        input_tokens: 0,
        output_tokens: 0,
        estimated_tokens: 0,
        ms: 'ms',
      },
    ]);
    expect(plainUsage.prompt_tokens + streamUsage.completion_tokens).toBeGreaterThan(0);
  });

  it('a revoked key is refused and logged by its id', async () => {
    expect((await d.manage('POST', `/v1/keys/${key.id}/revoke`)).status).toBe(200);
    const refused = await d.chat(key.secret, { model: MODEL, messages: [{ role: 'user', content: 'x' }] });
    expect(refused.status).toBe(401);
    await d.daemon.ctx.usageLog!.flush();
    expect(timed((await linesOf(path())).at(-1)!)).toEqual({
      time: new Date(T0).toISOString(),
      id: refused.headers['x-request-id'],
      key: key.id,
      instance: 'gpu-1',
      route: '/v1/chat/completions',
      model: MODEL,
      stream: null,
      status: 401,
      outcome: 'refused',
      error: 'revoked_api_key',
      input_tokens: 0,
      output_tokens: 0,
      estimated_tokens: 0,
      ms: 'ms',
    });
  });

  it('no line holds a secret or a prompt, and the file is the operator’s alone', async () => {
    const text = await readFile(path(), 'utf8');
    expect(text).not.toContain(key.secret);
    expect(text).not.toContain(key.secret.slice(-12));
    expect(text).not.toContain('ob_sk_');
    expect(text).not.toContain('prompt"');
    expect(text).not.toContain('the plain prompt');
    expect(text).not.toContain('the streamed prompt');
    expect((await stat(path())).mode & 0o777).toBe(0o600);
  });
});

describe('the parts the log keeps by key', () => {
  it('are dropped when their key is revoked, and not kept again for it', async () => {
    const { d, key } = await daemonWithLog({ path: join(dir, 'kept.jsonl'), maxBytes: 1024 * 1024, files: 1 });
    try {
      const log = d.daemon.ctx.usageLog!;
      const made = await d.manage('POST', '/v1/keys', { instance: 'gpu-1', name: 'second' });
      expect(made.status).toBe(201);
      const second = made.json as { id: string; secret: string };
      for (const secret of [key.secret, second.secret]) {
        const a = await d.chat(secret, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
        expect(a.status).toBe(200);
      }
      expect(log.keysKept).toBe(2);
      expect((await d.manage('POST', `/v1/keys/${key.id}/revoke`)).status).toBe(200);
      expect(log.keysKept).toBe(1);
      const refused = await d.chat(key.secret, { model: MODEL, messages: [{ role: 'user', content: 'x' }] });
      expect(refused.status).toBe(401);
      expect(log.keysKept).toBe(1);
      // Stopping the instance revokes the other key too: none is kept.
      expect((await d.manage('POST', '/v1/instances/gpu-1/stop')).status).toBe(200);
      expect(log.keysKept).toBe(0);
      await log.flush();
      expect((await linesOf(join(dir, 'kept.jsonl'))).map((l) => [l.key, l.status])).toEqual([
        [key.id, 200],
        [second.id, 200],
        [key.id, 401],
      ]);
    } finally {
      await d.close();
    }
  });
});

describe('written off the request path', () => {
  it('a line reaches the file on its own, a moment after its request, with no flush asked', async () => {
    const path = join(dir, 'own.jsonl');
    const { d, key } = await daemonWithLog({ path, maxBytes: 1024 * 1024, files: 1 });
    try {
      const a = await d.chat(key.secret, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
      expect(a.status).toBe(200);
      // Polled, bounded: the batch's timer writes it (a second after the line), not the request.
      let lines: Line[] = [];
      for (let i = 0; i < 200 && lines.length === 0; i++) {
        const text = await readFile(path, 'utf8');
        if (text !== '') lines = await linesOf(path);
        else await new Promise((r) => setTimeout(r, 50));
      }
      expect(lines.map((l) => [l.id, l.status])).toEqual([[a.headers['x-request-id'], 200]]);
    } finally {
      await d.close();
    }
  });
});

describe('rotation by size', () => {
  it('rotates before the file passes --usage-log-max-bytes and keeps --usage-log-files', async () => {
    const sub = await mkdtemp(join(dir, 'rot-'));
    const path = join(sub, 'usage.jsonl');
    const { d, key } = await daemonWithLog({ path, maxBytes: 1024, files: 2 });
    try {
      const log = d.daemon.ctx.usageLog!;
      // One request a batch: each line is about 300 bytes, so a file takes three before it rotates.
      const ids: string[] = [];
      for (let i = 0; i < 12; i++) {
        const a = await d.chat(key.secret, { model: MODEL, messages: [{ role: 'user', content: `n${i}` }] });
        expect(a.status).toBe(200);
        ids.push(a.headers['x-request-id'] as string);
        await log.flush();
      }
      expect((await readdir(sub)).sort()).toEqual(['usage.jsonl', 'usage.jsonl.1', 'usage.jsonl.2']);
      const files = [`${path}.2`, `${path}.1`, path];
      const sizes = await Promise.all(files.map(async (f) => (await stat(f)).size));
      for (const size of sizes) expect(size).toBeLessThanOrEqual(1024);
      // Each file was rotated only when the next line would not fit.
      const lineBytes = Math.max(...(await readFile(path, 'utf8')).split('\n').map((l) => l.length + 1));
      for (const size of sizes.slice(0, 2)) expect(size + lineBytes).toBeGreaterThan(1024);
      // The newest lines, in order, none lost between the files kept; the oldest file deleted.
      const kept = (await Promise.all(files.map(linesOf))).flat();
      expect(kept.length).toBeLessThan(12);
      expect(kept.map((l) => l.id)).toEqual(ids.slice(12 - kept.length));
      expect(kept.every((l) => l.key === key.id && l.status === 200)).toBe(true);
      expect(d.daemon.ctx.lifecycle.registry.keys.get(key.id)!.usage.requests).toBe(12);
    } finally {
      await d.close();
    }
  });
});

describe('a disk that refuses every write', () => {
  it('answers every request as before, and says once that lines were lost', async () => {
    const { d, key } = await daemonWithLog({ path: '/dev/full', maxBytes: 1024 * 1024, files: 1 });
    try {
      for (let i = 0; i < 3; i++) {
        const a = await d.chat(key.secret, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] });
        expect(a.status).toBe(200);
        expect((a.json as { object: string }).object).toBe('chat.completion');
        await d.daemon.ctx.usageLog!.flush();
      }
      const warnings = d.logs.filter((l) => String(l.msg).startsWith('usage log:'));
      expect(warnings.map((l) => [l.msg, l.lost])).toEqual([
        ['usage log: lines dropped; requests are served as before', 1],
      ]);
      expect(String(warnings[0]!.err)).toContain('ENOSPC');
    } finally {
      await d.close();
    }
    expect(d.logs.filter((l) => String(l.msg).startsWith('usage log:')).map((l) => [l.msg, l.lost])).toEqual([
      ['usage log: lines dropped; requests are served as before', 1],
      ['usage log: lines were lost (disk full or failing)', 3],
    ]);
  });
});
