/**
 * A machine with no Node, for a command that must not need one: `unshare --mount` with every
 * `node` this process could start bound over by /dev/null and the checkout and its node_modules
 * under empty tmpfs mounts, then exec of the command. Where no mount namespace is allowed the
 * jail is empty and the command runs with an empty PATH only.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { delimiter, join } from 'node:path';

function which(tool: string): string {
  return execFileSync('/bin/sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim();
}

/** Every `node` this process could start: its own, and any on its PATH. */
export function nodesOnThisMachine(): string[] {
  const found = new Set([realpathSync(process.execPath)]);
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    for (const name of ['node', 'nodejs']) {
      const p = join(dir, name);
      if (dir !== '' && existsSync(p)) found.add(realpathSync(p));
    }
  }
  return [...found];
}

/** A word quoted for /bin/sh. */
export const quote = (s: string): string => `'${s.replaceAll("'", "'\\''")}'`;

/**
 * `unshare --mount`, hiding the nodes and the checkout (`root`), then exec of the command; tried
 * as root first, then in a user namespace. Returns [] where neither is allowed (PATH alone is
 * empty).
 */
export function makeJail(root: string): string[] {
  let unshare: string;
  let mount: string;
  try {
    [unshare, mount] = [which('unshare'), which('mount')];
  } catch {
    process.stderr.write('binary.test: no unshare or mount here; the binary runs with an empty PATH only\n');
    return [];
  }
  // The nodes first: one of them (this process's) lies inside the node_modules hidden next.
  const hide = [
    ...nodesOnThisMachine().map((n) => `${quote(mount)} --bind /dev/null ${quote(n)}`),
    ...[root, realpathSync(join(root, 'node_modules'))].map((d) => `${quote(mount)} -t tmpfs tmpfs ${quote(d)}`),
  ];
  const script = `set -e; ${hide.join('; ')}; exec "$@"`;
  for (const ns of [['--mount'], ['--user', '--map-root-user', '--mount']]) {
    const prefix = [unshare, ...ns, '--propagation', 'private', '/bin/sh', '-c', script, 'no-node'];
    try {
      execFileSync(prefix[0]!, [...prefix.slice(1), '/bin/true'], { stdio: 'ignore' });
      return prefix;
    } catch {
      // Not allowed here: try the next way, or fall back to PATH alone.
    }
  }
  process.stderr.write('binary.test: no mount namespace allowed here; the binary runs with an empty PATH only\n');
  return [];
}
