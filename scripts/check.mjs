/* global process, performance, Buffer */
/**
 * `npm run check`: type-check, lint, format check, build, the import-circle check
 * (import-circles.mjs) and the whole-context check (whole-context.mjs), all at once. They are
 * independent and each is one thread, so together they take about as long as the longest. Each
 * prints its output whole when it ends, then one line gives each one's time; the exit code is 1
 * if any failed.
 *
 * `npm test` (`--with-tests`) runs the in-process tier alongside them, its output as it comes and
 * theirs after it. The tests spend most of their time waiting on sockets and timers, which the
 * checks' CPU fills; the checks run at the lowest priority, so the tests' timers come first.
 *
 * Each keeps what it learnt between runs, and a clean clone (CI) starts from nothing:
 * - typecheck and build: tsc's incremental state (node_modules/.cache/ob-proxy, and dist/ for the
 *   build, so that a deleted dist/ is built again whole);
 * - format check: Prettier's cache, by file content;
 * - lint: ESLint's cache, by file content. The type-aware rules on the shipped code read other
 *   files' types, which ESLint's cache does not follow, so that cache is kept under a hash of the
 *   shipped code, the lint config, the tsconfigs and the lockfile: a change to any of them lints
 *   the whole tree again; a change to tests or benches alone lints only the files changed.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { setPriority } from 'node:os';
import { mkdirSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const cache = join(root, 'node_modules', '.cache', 'ob-proxy');

/** What the type-aware lint rules depend on (eslint.config.js: the shipped code's block). */
const TYPED_DIRS = ['src', 'daemon', 'cli', 'bin', 'simulator'];
const TYPED_FILES = [
  'eslint.config.js',
  'tsconfig.base.json',
  'tsconfig.json',
  'tsconfig.build.json',
  'package-lock.json',
];

function files(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => (a.name < b.name ? -1 : 1))
    .flatMap((e) => (e.isDirectory() ? files(join(dir, e.name)) : e.isFile() ? [join(dir, e.name)] : []));
}

function lintCacheDir() {
  const hash = createHash('sha256');
  for (const file of [...TYPED_DIRS.flatMap((d) => files(join(root, d))), ...TYPED_FILES.map((f) => join(root, f))]) {
    hash.update(file.slice(root.length));
    hash.update('\0');
    hash.update(readFileSync(file));
  }
  const name = `eslint-${hash.digest('hex').slice(0, 16)}`;
  mkdirSync(cache, { recursive: true });
  for (const old of readdirSync(cache)) {
    if (old.startsWith('eslint-') && old !== name) rmSync(join(cache, old), { recursive: true, force: true });
  }
  return join(cache, name) + '/';
}

const TASKS = [
  ['typecheck', []],
  ['lint', ['--cache', '--cache-strategy', 'content', '--cache-location', lintCacheDir()]],
  ['format:check', ['--cache', '--cache-strategy', 'content', '--cache-location', join(cache, 'prettier')]],
  ['build', []],
  ['circles', []],
  ['whole-context', []],
];

function run([script, extra]) {
  const started = performance.now();
  const args = ['run', '--silent', script, ...(extra.length > 0 ? ['--', ...extra] : [])];
  const child = spawn('npm', args, { cwd: root, stdio: ['ignore', 'pipe', 'pipe'] });
  const out = [];
  child.stdout.on('data', (b) => out.push(b));
  child.stderr.on('data', (b) => out.push(b));
  return new Promise((done) => {
    child.on('error', (err) => done({ script, code: 1, output: `${err.message}\n`, seconds: 0 }));
    child.on('close', (code, signal) =>
      done({
        script,
        code: code ?? 1,
        output: Buffer.concat(out).toString() + (signal === null ? '' : `${script}: ended by ${signal}\n`),
        seconds: (performance.now() - started) / 1000,
      }),
    );
  });
}

/** The in-process tier, its output straight to the terminal as it comes. */
function runTests() {
  const started = performance.now();
  const args = [join(root, 'node_modules', 'vitest', 'vitest.mjs'), 'run', '--project', 'fast*'];
  const child = spawn(process.execPath, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  return new Promise((done) => {
    child.on('error', (err) => done({ script: 'tests', code: 1, output: `${err.message}\n`, seconds: 0 }));
    child.on('close', (code, signal) =>
      done({
        script: 'tests',
        code: code ?? 1,
        output: signal === null ? '' : `tests: ended by ${signal}\n`,
        seconds: (performance.now() - started) / 1000,
      }),
    );
  });
}

const started = performance.now();
const tests = process.argv.includes('--with-tests') ? runTests() : null;
if (tests !== null) {
  // Inherited by the checks spawned next, not by the tests already running.
  try {
    setPriority(19);
  } catch {
    // A platform without priorities runs them side by side all the same.
  }
}
const checks = Promise.all(TASKS.map((task) => run(task)));
const results =
  tests === null ? await checks.then((rs) => rs.map(report)) : [...(await checks), await tests].map(report);

function report(r) {
  if (r.output !== '') process.stdout.write(r.output);
  const what = r.script === 'tests' ? 'the in-process tests' : `npm run ${r.script}`;
  if (r.code !== 0) process.stdout.write(`✗ ${what} failed (exit ${r.code})\n`);
  return r;
}

const times = results.map((r) => `${r.script} ${r.seconds.toFixed(1)} s${r.code === 0 ? '' : ' ✗'}`).join(', ');
process.stdout.write(`check: ${times}; ${((performance.now() - started) / 1000).toFixed(1)} s in all\n`);
process.exitCode = results.every((r) => r.code === 0) ? 0 : 1;
