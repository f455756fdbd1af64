/**
 * A fast CLI is one that loads only what a command needs: `--help`, `instances list`
 * and `keys list` must not load the daemon (Fastify, pino, the store), undici, the simulator,
 * Ink or React. Asserted on the modules the process resolved (test/helpers/record-imports.mjs),
 * never on time; `npm run bench` measures the time.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { type Server, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BIN, NODE, type ServeProcess, startServe, tmpHome } from '../helpers/processes.js';

const HOOK = resolve(import.meta.dirname, '../helpers/record-imports.mjs');
const HEAVY =
  /\/node_modules\/(fastify|@fastify|undici|pino|lowdb|pg|ink|react|yoga-layout)\/|\/dist\/daemon\/|\/dist\/cli\/console\//;

async function imports(args: string[]): Promise<{ code: number; modules: string[] }> {
  const file = join(await mkdtemp(join(tmpdir(), 'obt-')), 'imports.txt');
  const code = await new Promise<number>((done) => {
    execFile(
      NODE,
      ['--import', HOOK, BIN, ...args],
      { env: { ...process.env, OB_TEST_IMPORTS: file, NO_COLOR: '1' }, timeout: 20_000 },
      (err) => {
        done(err === null ? 0 : typeof err.code === 'number' ? err.code : 1);
      },
    );
  });
  return { code, modules: (await readFile(file, 'utf8')).split('\n') };
}

let serve: ServeProcess;
beforeAll(async () => {
  serve = await startServe(await tmpHome());
});
afterAll(async () => {
  await serve.stop();
});

describe('each command loads only what it needs', () => {
  for (const args of [
    ['--help'],
    ['--version'],
    ['instances', 'list'],
    ['keys', 'list'],
    ['instances', 'list', '--json'],
    ['keys', 'create', '--help'],
    ['revocations'],
  ]) {
    it(`ob-proxy ${args.join(' ')}: no daemon, undici, Ink or React`, async () => {
      const r = await imports([...args, '--home', serve.home]);
      expect(r.code).toBe(0);
      expect(r.modules.some((m) => m.includes('/node_modules/commander/'))).toBe(true);
      expect(r.modules.filter((m) => HEAVY.test(m))).toEqual([]);
    });
  }

  it('the recorder sees the heavy modules where a command does load them (serve)', async () => {
    const taken: Server = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', r));
    try {
      const r = await imports([
        'serve',
        '--home',
        await tmpHome(),
        '--port',
        String((taken.address() as { port: number }).port),
      ]);
      expect(r.code).toBe(1);
      expect(r.modules.some((m) => m.includes('/node_modules/fastify/'))).toBe(true);
      // Tracing's SDK only for a daemon that sends traces.
      expect(r.modules.filter((m) => m.includes('/node_modules/@opentelemetry/'))).toEqual([]);
      const traced = await imports([
        'serve',
        '--home',
        await tmpHome(),
        '--port',
        String((taken.address() as { port: number }).port),
        '--otlp-endpoint',
        'http://127.0.0.1:9',
      ]);
      expect(traced.code).toBe(1);
      expect(traced.modules.some((m) => m.includes('/node_modules/@opentelemetry/sdk-trace/'))).toBe(true);
    } finally {
      await new Promise<void>((r) => taken.close(() => r()));
    }
  });
});
