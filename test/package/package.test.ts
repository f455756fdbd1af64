/**
 * The package as a user gets it: `npm pack`, then `npm install -g` of the tarball into
 * a temporary prefix, then the installed `ob-proxy`: --version, and the demo's export and curl
 * lines pasted into bash for a real completion. Behind `npm run test:dist` (it installs the
 * dependencies from the registry); `.ci/run` runs it.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually, tmpHome } from '../helpers/processes.js';

const ROOT = resolve(import.meta.dirname, '../..');
// npm's own notice about the host's npmrc is not the package's doing.
const NOISE = /Unknown (user|project|env) config/;

function sh(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      cmd,
      args,
      { cwd: opts.cwd ?? ROOT, env: opts.env ?? process.env, timeout: 540_000, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => {
        done({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : 1, stdout, stderr });
      },
    );
  });
}

function warnings(stderr: string): string[] {
  return stderr.split('\n').filter((l) => /npm (warn|WARN)/.test(l) && !NOISE.test(l));
}

let dir: string;
let tarball: string;
let bin: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'obpkg-'));
  const pack = await sh('npm', ['pack', '--pack-destination', dir]);
  expect(pack.code, pack.stderr).toBe(0);
  tarball = join(dir, pack.stdout.trim().split('\n').pop()!);
  const prefix = join(dir, 'prefix');
  const install = await sh('npm', ['install', '-g', '--prefix', prefix, '--no-fund', '--no-audit', tarball], {
    cwd: dir,
  });
  expect(install.code, install.stderr).toBe(0);
  // No EBADENGINE, no install-scripts notice: nothing for a user to wonder about.
  expect(warnings(install.stderr)).toEqual([]);
  bin = join(prefix, 'bin', 'ob-proxy');
});

afterAll(async () => {
  if (dir !== undefined) await rm(dir, { recursive: true, force: true });
});

describe('the npm package', () => {
  it('holds only what runs: dist (simulator included: `ob-proxy simulate`, demo), docs, the service unit, README, LICENSE, package.json; and no build step for users', async () => {
    const list = await sh('tar', ['-tzf', tarball]);
    const files = list.stdout.trim().split('\n');
    expect(
      files.filter(
        (f) =>
          !/^package\/(dist\/(bin|cli|daemon|simulator|src)\/|docs\/[^/]+\.(md|json)$|packaging\/ob-proxy\.service$|README\.md$|LICENSE$|package\.json$)/.test(
            f,
          ),
      ),
    ).toEqual([]);
    expect(files).toContain('package/dist/bin/ob-proxy.js');
    expect(files).toContain('package/LICENSE');
    const manifest = JSON.parse((await sh('tar', ['-xzOf', tarball, 'package/package.json'])).stdout) as Record<
      string,
      unknown
    >;
    expect(manifest.private).toBeUndefined();
    expect(manifest.scripts).toBeUndefined();
    expect(manifest.devDependencies).toBeUndefined();
    expect(manifest.engines).toEqual({ node: '>=22.15.0' });
    // The checkout's own manifest is back as it was after packing.
    const checkout = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as {
      scripts: Record<string, string>;
    };
    expect(checkout.scripts.prepare).toBe('npm run build');
  });

  it('the installed bin prints its version', async () => {
    const r = await sh(bin, ['--version']);
    expect([r.code, r.stdout]).toEqual([0, '0.1.0\n']);
  });

  it('the installed demo serves a completion to its own curl line', async () => {
    const home = await tmpHome();
    const proc = spawn(bin, ['demo', '--port', '0', '--home', home], { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      let out = '';
      proc.stdout.setEncoding('utf8').on('data', (s: string) => {
        out += s;
      });
      await eventually(() => out.includes('Press Ctrl-C to stop.'), 'the demo text', 30_000);
      const lines = out.split('\n');
      const exported = lines.find((l) => l.startsWith('export OB_KEY='))!;
      const curl = lines.find((l) => l.startsWith('printf ') && l.includes('| curl '))!;
      const r = await sh('bash', ['-c', `${exported}\n${curl}`]);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({
        object: 'chat.completion',
        model: 'gemma4:26b',
        choices: [{ finish_reason: 'stop' }],
      });
    } finally {
      const exited = new Promise((r) => proc.once('exit', (code) => r(code)));
      proc.kill('SIGINT');
      expect(await exited).toBe(0);
    }
  });
});
