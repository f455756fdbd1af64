/* global process */
/**
 * The CLI scenario of `npm run bench`: wall time from spawn to exit of CLI commands
 * users type, against `node -e 0` measured in the same interleaved rounds, so the figures say
 * what ob-proxy adds to starting Node on the machine that runs it. `instances list` and `keys list` talk
 * to a running daemon (the bench's ob-proxy target). Medians of `runs` rounds, after one
 * untimed round that warms the file cache.
 */
import { spawn } from 'node:child_process';
import { median } from './report.mjs';

function wallMs(args) {
  return new Promise((done, fail) => {
    const t0 = process.hrtime.bigint();
    const proc = spawn(process.execPath, args, {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, NO_COLOR: '1' },
    });
    let err = '';
    proc.stderr.setEncoding('utf8').on('data', (s) => {
      err += s;
    });
    proc.once('error', fail);
    proc.once('exit', (code) => {
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (code === 0) done(ms);
      else fail(new Error(`node ${args.join(' ')} exited ${code}: ${err}`));
    });
  });
}

export async function measureCli({ bin, home, runs }) {
  const commands = [
    ['node -e 0', ['-e', '0']],
    ['ob-proxy --help', [bin, '--help']],
    ['ob-proxy instances list', [bin, 'instances', 'list', '--home', home]],
    ['ob-proxy keys list', [bin, 'keys', 'list', '--home', home]],
  ];
  for (const [, args] of commands) await wallMs(args);
  const times = Object.fromEntries(commands.map(([name]) => [name, []]));
  for (let round = 0; round < runs; round++) {
    for (const [name, args] of commands) times[name].push(await wallMs(args));
  }
  const base = median(times['node -e 0']);
  return {
    runs,
    node: process.version,
    commands: commands.map(([name]) => {
      const m = median(times[name]);
      return {
        command: name,
        medianMs: m,
        overNodeMs: m - base,
        minMs: Math.min(...times[name]),
        maxMs: Math.max(...times[name]),
      };
    }),
  };
}
