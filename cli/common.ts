import { homedir } from 'node:os';
import { Command, Option } from 'commander';
import { type FlagName, SETTINGS } from '../src/config.js';
import { cliTimeoutMs, resolvePaths } from '../src/config-resolve.js';
import { shownDefault } from '../src/config-read.js';
import { ObProxyError } from '../src/errors.js';
import type { DaemonClient } from './daemon-client.js';
import type { Io } from './output.js';
import { UsageError } from './usage-error.js';

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

/**
 * A setting's flag as src/config.ts declares it. Commander only parses the flag: the variable is
 * read with the rest of the configuration (resolveConfig, resolvePaths), so `--help` names it
 * but commander never reads it.
 */
export function settingOption(name: FlagName, help?: string): Option {
  const s = SETTINGS[name];
  return new Option(`--${s.flag} ${s.value}`, `${help ?? s.help} (default ${shownDefault(s)}; env: ${s.env})`);
}

/** Every command takes --home, --socket and --json (docs/contract.md §2). */
export function withCommon(cmd: Command): Command {
  return cmd
    .addOption(settingOption('home'))
    .addOption(settingOption('socket'))
    .option('--json', 'print exactly one JSON document on stdout');
}

export function socketPath(opts: CommonOptions, deps: CliDeps): string {
  return resolvePaths(opts, deps.io.env, deps.homedir ?? homedir()).socket;
}

/** Runs `fn` with a client to the daemon, and always closes it. */
export async function withClient<T>(
  opts: CommonOptions,
  deps: CliDeps,
  fn: (client: DaemonClient) => Promise<T>,
): Promise<T> {
  let timeoutMs: number;
  try {
    timeoutMs = cliTimeoutMs(deps.io.env);
  } catch (err) {
    throw err instanceof ObProxyError ? new UsageError(err.message) : err;
  }
  const client = await deps.connect(socketPath(opts, deps));
  client.timeoutMs = timeoutMs;
  try {
    return await fn(client);
  } finally {
    await client.close().catch(() => {});
  }
}

export function example(cmd: Command, ...lines: string[]): Command {
  return cmd.addHelpText(
    'after',
    `\nExample${lines.length > 1 ? 's' : ''}:\n${lines.map((l) => `  $ ${l}`).join('\n')}\n`,
  );
}
