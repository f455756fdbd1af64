/* global process, setTimeout */
/**
 * The coding agents the tests run, installed on demand at pinned versions, not by the root `npm
 * ci`: Claude Code and Codex CLI are native binaries of 370 and 315 MB, needed only by the tests
 * that run them (test/conformance/agents.test.ts, test/e2e/codex-cli.test.ts) and by the capture
 * script (scripts/capture-agent-bodies.mjs). `installAgents()` runs `npm install --prefix` into
 * `node_modules/.cache/ob-proxy/agents/<versions>/` (under node_modules, so ignored by git and
 * gone with a clean clone), once per checkout: the folder is built beside its final name and
 * renamed into place only when both agents answer `--version` with their pinned versions, and a
 * lock folder makes a second process (another test file, a second run) wait for the first
 * rather than download the same 700 MB again.
 *
 * Install scripts are not run (`--ignore-scripts`): npm 11 warns about any not listed in
 * `allowScripts` and is to refuse them, and the only one, Claude Code's postinstall, copies its
 * platform package's binary over a placeholder. The binaries are taken from the platform
 * packages (the optional dependencies npm installs for the platform) instead. Plain JavaScript (typed
 * by agents-install.d.mts) so that the capture script, which is not compiled, shares it.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The versions the tests and the corpus were made with. */
export const AGENT_VERSIONS = Object.freeze({
  '@anthropic-ai/claude-code': '2.1.328',
  '@openai/codex': '0.171.0',
});

const REPO = resolve(import.meta.dirname, '../..');

/** Where installs live: under node_modules, so a clean clone has none and git sees none. */
export const AGENTS_ROOT = join(REPO, 'node_modules/.cache/ob-proxy/agents');

const STAMP = Object.entries(AGENT_VERSIONS)
  .map(([name, version]) => `${name.replace(/^@[^/]+\//, '')}@${version}`)
  .join('+');

/** An install takes a few minutes on a slow link; a lock older than this is taken as abandoned. */
const LOCK_WAIT_MS = 15 * 60_000;

const isMusl = () => process.platform === 'linux' && !process.report?.getReport().header.glibcVersionRuntime;

/** Claude Code's platform package, as its install.cjs names them. */
function claudePlatform() {
  const key = `${process.platform}-${process.arch}${isMusl() ? '-musl' : ''}`;
  const known = ['darwin-arm64', 'darwin-x64', 'linux-x64', 'linux-arm64', 'linux-x64-musl', 'linux-arm64-musl'];
  if (!known.includes(key)) throw new Error(`Claude Code has no native binary for ${key}`);
  return `@anthropic-ai/claude-code-${key}`;
}

function binaries(dir) {
  const modules = join(dir, 'node_modules');
  return {
    dir,
    claude: join(modules, claudePlatform(), 'claude'),
    // The npm launcher: finds the platform binary and puts its helpers (rg) on PATH, then
    // replaces itself with it (execve). Run with Node: `node <codexJs> exec …`.
    codexJs: join(modules, '@openai/codex/bin/codex.js'),
    versions: AGENT_VERSIONS,
  };
}

async function versionOf(file, args) {
  const { stdout } = await run(file, args, { timeout: 60_000, env: { ...process.env, NO_COLOR: '1' } });
  return stdout.trim();
}

/** Throws unless both agents in `dir` run and report their pinned versions. */
async function check(dir) {
  const b = binaries(dir);
  for (const [what, file] of [
    ['Claude Code', b.claude],
    ['Codex', b.codexJs],
  ])
    if (!existsSync(file)) throw new Error(`${what} is not where its package puts it: ${file} is missing`);
  const claude = await versionOf(b.claude, ['--version']);
  const codex = await versionOf(process.execPath, [b.codexJs, '--version']);
  if (!claude.startsWith(`${AGENT_VERSIONS['@anthropic-ai/claude-code']} `))
    throw new Error(`claude --version says ${JSON.stringify(claude)}`);
  if (codex !== `codex-cli ${AGENT_VERSIONS['@openai/codex']}`)
    throw new Error(`codex --version says ${JSON.stringify(codex)}`);
  return b;
}

const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
};

/** Takes the lock folder, waiting for a live holder; a dead holder's lock is removed. */
async function lock(path) {
  const deadline = Date.now() + LOCK_WAIT_MS;
  for (;;) {
    try {
      await mkdir(path);
      await writeFile(join(path, 'pid'), String(process.pid));
      return;
    } catch (err) {
      if (err.code !== 'EEXIST') throw err;
    }
    const pid = Number(await readFile(join(path, 'pid'), 'utf8').catch(() => '0'));
    // A holder that has not yet written its pid is given the benefit of the doubt until the deadline.
    if (pid > 0 && !alive(pid)) await rm(path, { recursive: true, force: true });
    else if (Date.now() > deadline) throw new Error(`agents install: ${path} held by pid ${pid} for too long`);
    else await new Promise((r) => setTimeout(r, 500));
  }
}

let installing = null;

/**
 * The pinned agents, installed if they are not yet: `{ dir, claude, codexJs, versions }`.
 * Idempotent, and safe to call from several processes at once.
 */
export function installAgents() {
  installing ??= (async () => {
    const target = join(AGENTS_ROOT, STAMP);
    if (existsSync(join(target, '.ready'))) return binaries(target);
    await mkdir(AGENTS_ROOT, { recursive: true });
    const held = join(AGENTS_ROOT, `${STAMP}.lock`);
    await lock(held);
    try {
      // Another process may have finished it while this one waited.
      if (existsSync(join(target, '.ready'))) return binaries(target);
      await rm(target, { recursive: true, force: true });
      const building = await mkdtemp(join(AGENTS_ROOT, '.building-'));
      try {
        await writeFile(
          join(building, 'package.json'),
          JSON.stringify({ private: true, description: 'ob-proxy test agents', dependencies: AGENT_VERSIONS }, null, 2),
        );
        await run(
          'npm',
          ['install', '--prefix', building, '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel', 'error'],
          { timeout: LOCK_WAIT_MS, maxBuffer: 16 * 1024 * 1024 },
        ).catch((err) => {
          throw new Error(`npm install of ${STAMP} failed: ${err.stderr || err.message}`);
        });
        await check(building);
        await writeFile(join(building, '.ready'), `${JSON.stringify(AGENT_VERSIONS)}\n`);
        await rename(building, target);
      } catch (err) {
        await rm(building, { recursive: true, force: true });
        throw err;
      }
      return binaries(target);
    } finally {
      await rm(held, { recursive: true, force: true });
    }
  })();
  installing.catch(() => (installing = null));
  return installing;
}
