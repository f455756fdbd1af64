import { homedir } from 'node:os';
import { join } from 'node:path';
import { Command, Option } from 'commander';
import type { DaemonClient } from './daemon-client.js';
import type { Io } from './output.js';

export interface CommonOptions {
  home?: string;
  socket?: string;
  json?: boolean;
}

export interface CliDeps {
  io: Io;
  homedir?: string;
  /** Async so that a command that never talks to the daemon never loads its client. */
  connect(socketPath: string): Promise<DaemonClient>;
}

/** Every command takes --home, --socket and --json (CONTRACT §2). */
export function withCommon(cmd: Command): Command {
  return cmd
    .addOption(new Option('--home <dir>', 'ob-proxy home folder (store, socket)').env('OB_PROXY_HOME'))
    .addOption(new Option('--socket <path>', 'management socket of the daemon').env('OB_PROXY_SOCKET'))
    .option('--json', 'print exactly one JSON document on stdout');
}

export function socketPath(opts: CommonOptions, deps: CliDeps): string {
  if (opts.socket !== undefined && opts.socket !== '') return opts.socket;
  const home = opts.home !== undefined && opts.home !== '' ? opts.home : join(deps.homedir ?? homedir(), '.ob-proxy');
  return join(home, 'ob-proxy.sock');
}

/** Runs `fn` with a client to the daemon, and always closes it. */
export async function withClient<T>(opts: CommonOptions, deps: CliDeps, fn: (client: DaemonClient) => Promise<T>): Promise<T> {
  const client = await deps.connect(socketPath(opts, deps));
  try {
    return await fn(client);
  } finally {
    await client.close().catch(() => {});
  }
}

export function example(cmd: Command, ...lines: string[]): Command {
  return cmd.addHelpText('after', `\nExample${lines.length > 1 ? 's' : ''}:\n${lines.map((l) => `  $ ${l}`).join('\n')}\n`);
}
