/**
 * Node turns its async context frames on once, when something first reads async_hooks'
 * AsyncLocalStorage. Left to Fastify's boot, that came after the store's start-up had run its
 * ticks, and process.nextTick and the tick loop stayed optimised with generic property loads
 * (docs/performance.md, "What each optimisation bought"). `serve` turns them on itself, by importing node:async_hooks
 * before anything else runs: asserted on the stack that turns them on, never on time.
 */
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, NODE, tmpHome } from '../helpers/processes.js';

const PROBE = resolve(import.meta.dirname, '../helpers/async-context-probe.cjs');

describe('serve turns async context frames on before its start-up', () => {
  it('from the import of node:async_hooks, not from a dependency later', async () => {
    const home = await tmpHome();
    const file = join(home, 'acf-stack.txt');
    const p = spawn(NODE, ['--expose-internals', '--require', PROBE, BIN, 'serve', '--home', home, '--port', '0'], {
      env: { ...process.env, OB_TEST_ACF: file, NO_COLOR: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    try {
      await new Promise<void>((done, fail) => {
        p.stdout.setEncoding('utf8').on('data', (s: string) => {
          out += s;
          if (out.includes('"ob-proxy serving"')) done();
        });
        p.once('exit', (code) => fail(new Error(`serve exited ${code}: ${out}`)));
      });
    } finally {
      p.kill('SIGTERM');
    }
    const stack = await readFile(file, 'utf8');
    // An ESM import of the builtin reads its exports, AsyncLocalStorage's getter among them.
    expect(stack).toContain('getESMFacade');
    expect(stack).not.toContain('/node_modules/');
    expect(stack).not.toMatch(/\/dist\/(daemon|src)\/.*:\d+:\d+/);
  });
});
