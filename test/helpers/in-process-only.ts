/**
 * `npm test`'s tier runs in process (vitest.config.ts): a test there that starts Node as a child
 * (the `ob-proxy` binary, `serve`, `simulate`, any script) fails at that call, naming where such
 * a test goes. Other programs (mkfifo, mount, systemd-analyze, PostgreSQL's) stay allowed: they
 * are tools a test uses, not the product run as a process.
 */
import childProcess from 'node:child_process';
import { syncBuiltinESMExports } from 'node:module';
import { basename } from 'node:path';
import { promisify } from 'node:util';

const GUARDED = Symbol.for('ob-proxy.in-process-only');

function isNode(file: unknown): boolean {
  if (typeof file !== 'string') return false;
  return file === process.execPath || /^node(?:js)?(?:\.exe)?$/.test(basename(file));
}

function refuse(what: string): never {
  throw new Error(
    `${what}: npm test runs in process. Build the daemon with buildInproc or startHarness and the ` +
      'simulator with buildSimulator (test/helpers/inproc.ts), or move this file under test/e2e/ ' +
      '(npm run test:e2e).',
  );
}

const cp = childProcess as unknown as Record<string, unknown> & { [GUARDED]?: true };
if (cp[GUARDED] !== true) {
  cp[GUARDED] = true;
  type Fn = ((head: unknown, ...rest: unknown[]) => unknown) & { [promisify.custom]?: Fn };
  const guard = (name: string, isNodeCall: (head: unknown) => boolean): void => {
    const original = cp[name] as Fn;
    const check = (head: unknown): void => {
      if (isNodeCall(head)) refuse(`child_process.${name}(${String(head)})`);
    };
    const guarded: Fn = function (this: unknown, head: unknown, ...rest: unknown[]): unknown {
      check(head);
      return original.call(this, head, ...rest);
    };
    // util.promisify(execFile) resolves { stdout, stderr } through this, past the export.
    const custom = original[promisify.custom];
    if (custom !== undefined) {
      guarded[promisify.custom] = (head: unknown, ...rest: unknown[]): unknown => {
        try {
          check(head);
        } catch (err) {
          return Promise.reject(err as Error);
        }
        return custom(head, ...rest);
      };
    }
    cp[name] = guarded;
  };
  for (const name of ['spawn', 'spawnSync', 'execFile', 'execFileSync']) guard(name, isNode);
  for (const name of ['exec', 'execSync']) {
    guard(name, (command) => typeof command === 'string' && isNode(command.trim().split(/\s+/)[0]));
  }
  cp.fork = (modulePath: unknown) => refuse(`child_process.fork(${String(modulePath)})`);
  // Named imports (`import { spawn } from 'node:child_process'`) see the guarded functions too.
  syncBuiltinESMExports();
}
