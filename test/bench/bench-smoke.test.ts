import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/**
 * Keeps `npm run bench` working: the real harness, in its short --smoke form, against the direct
 * upstream, ob-proxy (a real `serve` process from dist/) and the reference proxy, with the bench's
 * own Node load generator. It skips wrk and nginx on purpose, installed or not, so that it runs
 * the same everywhere; the wrk report parser is tested on a captured wrk report instead.
 * Nothing here asserts a time or a rate: only that every request succeeded and every stream
 * arrived whole.
 */

const ROOT = resolve(import.meta.dirname, '../..');
const TARGETS = ['direct', 'ob-proxy', 'reference'];
const SCENARIOS = ['plain-c1', 'plain-c64', 'stream-c1', 'stream-c64', 'large-c1'];
const STREAMS = 50;

interface Run {
  requests: number;
  errors: number;
  rps: number | null;
  p50: number | null;
  tool: string;
  peakRssMiB: number;
}
interface StreamRun {
  requests: number;
  errors: number;
  non200: number;
  badStreams: number;
  maxOpen: number;
}
interface BenchDoc {
  targets: string[];
  results: Record<string, Record<string, Run>>;
  paced: Record<string, StreamRun>;
  held: Record<string, StreamRun & { perStreamKB: number }>;
  cli: { runs: number; commands: { command: string; medianMs: number; overNodeMs: number }[] } | null;
}

function runBench(args: string[]): Promise<{ code: number; stderr: string }> {
  return new Promise((done) => {
    execFile(
      process.execPath,
      [join(ROOT, 'bench/run.mjs'), ...args],
      { cwd: ROOT, timeout: 150_000 },
      (err, _stdout, stderr) => {
        done({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stderr });
      },
    );
  });
}

describe('npm run bench (smoke)', () => {
  let dir = '';
  afterAll(async () => {
    if (dir !== '') await rm(dir, { recursive: true, force: true });
  });

  it('measures direct, ob-proxy and the reference proxy, and writes the tables', async () => {
    dir = await mkdtemp(join(tmpdir(), 'obbs-'));
    const md = join(dir, 'RESULTS.md');
    const json = join(dir, 'latest.json');
    const r = await runBench([
      '--smoke',
      '--no-build',
      '--no-wrk',
      '--no-nginx',
      '--streams',
      String(STREAMS),
      '--out',
      md,
      '--json',
      json,
    ]);
    expect(r.code, r.stderr).toBe(0);

    const doc = JSON.parse(await readFile(json, 'utf8')) as BenchDoc;
    expect(doc.targets).toEqual(TARGETS);
    for (const sc of SCENARIOS) {
      for (const t of TARGETS) {
        const run = doc.results[sc]?.[t];
        expect(run, `${sc} ${t}`).toBeDefined();
        expect(run!.tool).toBe('loadgen');
        expect(run!.requests, `${sc} ${t}`).toBeGreaterThan(0);
        expect(run!.errors, `${sc} ${t}: failed requests or broken streams`).toBe(0);
        expect(run!.peakRssMiB).toBeGreaterThan(0);
      }
    }
    for (const t of TARGETS) {
      const paced = doc.paced[t]!;
      expect(paced.requests, `paced ${t}`).toBeGreaterThan(0);
      expect(paced.badStreams + paced.errors + paced.non200, `paced ${t}: a chunk was lost or reordered`).toBe(0);
      const held = doc.held[t]!;
      expect(held.requests, `held ${t}`).toBe(STREAMS);
      expect(held.badStreams + held.errors + held.non200, `held ${t}`).toBe(0);
      expect(held.maxOpen, `held ${t}: streams open at once`).toBe(STREAMS);
    }

    // The CLI scenario ran every command against `node -e 0`; its figures are reported, never judged here.
    expect(doc.cli!.commands.map((c) => c.command)).toEqual([
      'node -e 0',
      'ob-proxy --help',
      'ob-proxy instances list',
      'ob-proxy keys list',
    ]);
    for (const c of doc.cli!.commands) expect(c.medianMs, c.command).toBeGreaterThan(0);

    const text = await readFile(md, 'utf8');
    expect(text).toContain('## Targets (ob-proxy)');
    expect(text).toContain('## CLI start-up');
    for (const title of [
      'Non-streaming, 64 connections',
      'Streaming 64 chunks, 1 connection',
      'Large request body',
      `${STREAMS} concurrent slow streams`,
    ]) {
      expect(text).toContain(title);
    }
    expect(text).toMatch(/\| ob-proxy \| \d+ \|/);
    // The bench holds a real key for the run; it must never reach the report.
    expect(text).not.toContain('ob_sk_');
    expect(JSON.stringify(doc)).not.toContain('ob_sk_');
  }, 180_000);

  // The maintained tools outside `npm run bench` load, with every module they import, and say how they are run.
  it.each(['callgrind', 'profile', 'pg-cost', 'pool'])('bench/%s.mjs --help', async (tool) => {
    const out = await new Promise<{ code: number; stdout: string }>((done) => {
      execFile(process.execPath, [join(ROOT, `bench/${tool}.mjs`), '--help'], { cwd: ROOT }, (err, stdout) =>
        done({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout }),
      );
    });
    expect(out.code).toBe(0);
    expect(out.stdout).toContain(`node bench/${tool}.mjs`);
  });

  it('parses a wrk report', async () => {
    // Loaded by URL: the bench is plain .mjs, outside the TypeScript build.
    const { parseWrk } = (await import(pathToFileURL(join(ROOT, 'bench/wrk.mjs')).href)) as {
      parseWrk: (s: string) => Record<string, number | null>;
    };
    const report = [
      'Running 2s test @ http://127.0.0.1:34641/v1/chat/completions',
      '  1 threads and 64 connections',
      '  Latency Distribution',
      '     50%   80.00us',
      '     75%   90.00us',
      '     90%  205.00us',
      '     99%    2.69ms',
      '  25632 requests in 2.10s, 15.23MB read',
      '  Socket errors: connect 0, read 2, write 0, timeout 1',
      '  Non-2xx or 3xx responses: 7',
      'Requests/sec:  12209.05',
    ].join('\n');
    expect(parseWrk(report)).toEqual({ rps: 12209.05, requests: 25632, p50: 0.08, p99: 2.69, non200: 7, errors: 3 });
  });
  it('reports each extra target side by side with ob-proxy: medians of the rounds and their interval', async () => {
    const { togetherSection } = (await import(pathToFileURL(join(ROOT, 'bench/report.mjs')).href)) as {
      togetherSection: (t: unknown) => string[];
    };
    expect(togetherSection({})).toEqual([]);
    expect(togetherSection(undefined)).toEqual([]);
    const lines = togetherSection({
      baseline: {
        rounds: 3,
        seconds: 6,
        connections: 32,
        byKind: { plain: { rps: [0.96, 1.0, 0.98], cpu: [1.04, 1.0, 1.02] }, stream: { rps: [1.01], cpu: [0.99] } },
      },
    });
    const row = lines.find((l) => l.startsWith('| baseline '));
    // Three rounds give a median and an interval; one round only its figure.
    expect(row).toBe('| baseline | 3 | 0.980× (0.960–1.000) | 1.020× (1.000–1.040) | 1.010× | 0.990× |');
    expect(lines.join('\n')).toContain('32 connections for 6 s');
  });
});
