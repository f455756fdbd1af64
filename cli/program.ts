import { Command, CommanderError } from 'commander';
import { type FlagName } from '../src/config.js';
import { debugWanted } from '../src/config-resolve.js';
import { keyIdInSecret, looksLikeSecret } from '../src/domain/secret-shape.js';
import { ObProxyError } from '../src/errors.js';
import { printable } from '../src/printable.js';
import { type CliDeps, type CommonOptions, example, settingOption, socketPath, withCommon } from './common.js';
import { makeInstancesCommand } from './commands/instances.js';
import { makeKeysCommand, makeRevocationsCommand } from './commands/keys.js';
import { makeModelsCommand } from './commands/models.js';
import { makeStatusCommand } from './commands/status.js';
import { makeStoreCommand } from './commands/store.js';
import { makeUsageCommand } from './commands/usage.js';
import { errorLine } from './output.js';
import { UsageError } from './usage-error.js';

export { UsageError };

/** serve's flags are src/config.ts's, by the same names, plus the pid file. */
export interface ServeOptions extends CommonOptions, Partial<Record<FlagName, string>> {
  pidFile?: string;
}
export interface SimulateOptions {
  port: string;
  host: string;
  model: string[];
  firstTokenMs?: string;
  tokensPerSecond?: string;
  chunks?: string;
  fail?: string;
  failAfter?: string;
  errorStatus?: string;
  status?: string;
  bodyBytes?: string;
  reasoning?: boolean;
  flavor?: string;
  /** Commander's `--no-responses`: false when given. */
  responses?: boolean;
  /** Commander's `--no-completions`, `--no-messages`: false when given. */
  completions?: boolean;
  messages?: boolean;
  pidFile?: string;
}
export interface DemoOptions extends CommonOptions {
  port?: string;
  host?: string;
}

/** Long-running commands, injected by the entry point so cli/ never imports daemon/. */
export interface ProgramDeps extends CliDeps {
  serve(opts: ServeOptions): Promise<void>;
  simulate(opts: SimulateOptions): Promise<void>;
  demo(opts: DemoOptions): Promise<void>;
  console?(socketPath: string, opts: CommonOptions): Promise<void>;
  version: string;
}

export function makeProgram(deps: ProgramDeps): Command {
  const program = new Command('ob-proxy')
    .description('Key-bound OpenAI-compatible gateway for self-hosted chat models')
    .version(deps.version)
    .showSuggestionAfterError();

  program.addCommand(
    example(
      withCommon(new Command('serve'))
        .description('run the daemon in the foreground: proxy on TCP, management on the Unix socket')
        .addOption(settingOption('host'))
        .addOption(settingOption('port'))
        .addOption(settingOption('store'))
        .addOption(settingOption('maxStale'))
        .addOption(settingOption('upstreamTimeout'))
        .addOption(settingOption('grace'))
        .addOption(settingOption('bodyLimit'))
        .addOption(settingOption('bodyMemory'))
        .addOption(settingOption('bodyMemoryPerKey'))
        .addOption(settingOption('bodyMemoryPerInstance'))
        .addOption(settingOption('maxFrameBytes'))
        .addOption(settingOption('maxAnswerBytes'))
        .addOption(settingOption('maxErrorBytes'))
        .addOption(settingOption('responseDeadline'))
        .addOption(settingOption('probeInterval'))
        .addOption(settingOption('probeRate'))
        .addOption(settingOption('probeConcurrency'))
        .addOption(settingOption('packWarning'))
        .addOption(settingOption('logLevel'))
        .addOption(settingOption('logFormat'))
        .addOption(settingOption('metricsPort'))
        .addOption(settingOption('metricsHost'))
        .addOption(settingOption('tlsCert'))
        .addOption(settingOption('tlsKey'))
        .addOption(settingOption('socketGroup'))
        .addOption(settingOption('otlpEndpoint'))
        .addOption(settingOption('usageLog'))
        .addOption(settingOption('usageLogMaxBytes'))
        .addOption(settingOption('usageLogFiles'))
        .option(
          '--pid-file <file>',
          "write the daemon's pid here once it serves (removed at exit): what a script signals to stop it",
        )
        .addOption(settingOption('maxConcurrency'))
        .addOption(settingOption('queue'))
        .addOption(settingOption('queueTimeout'))
        .action((o: ServeOptions) => deps.serve(o)),
      'ob-proxy serve --port 8080',
      'ob-proxy serve --max-concurrency 4 --queue 32 --queue-timeout 30',
      'OB_PROXY_HOME=/var/lib/ob-proxy ob-proxy serve --host 0.0.0.0',
    ),
  );

  program.addCommand(makeInstancesCommand(deps));
  program.addCommand(makeModelsCommand(deps));
  program.addCommand(makeKeysCommand(deps));
  program.addCommand(makeRevocationsCommand(deps));
  program.addCommand(makeUsageCommand(deps));
  program.addCommand(makeStoreCommand(deps));
  program.addCommand(makeStatusCommand(deps));

  program.addCommand(
    example(
      withCommon(new Command('console'))
        .description('the interactive terminal console')
        .action(async (o: CommonOptions) => {
          if (deps.console === undefined) throw new UsageError('The console is not available in this build.');
          await deps.console(socketPath(o, deps), o);
        }),
      'ob-proxy console',
    ),
  );

  program.addCommand(
    example(
      new Command('simulate')
        .description('a simulated model server speaking the Ollama OpenAI-compatible API')
        .requiredOption('--port <port>', 'port to listen on (0 picks one)')
        .option('--host <host>', 'address to listen on', '127.0.0.1')
        .requiredOption('--model <model...>', 'model id(s) served')
        .option('--first-token-ms <ms>', 'delay before the first token')
        .option('--tokens-per-second <n>', 'pace of streamed tokens (0 = as fast as possible)')
        .option('--chunks <n>', 'tokens per reply')
        .option(
          '--fail <mode>',
          'failure mode: http-error, html-500, invalid-json, hang, reset-before-headers, hang-mid-stream, drop-mid-stream, eof-mid-stream, garbage, slow-drip; hostile: endless-line, endless-body, huge-body, huge-error, bad-status, hang-after-done, error-event, broken-error-event, named-error-event, sse-fields, named-event, html-frames',
        )
        .option('--status <status>', 'HTTP status for --fail bad-status (default 201)')
        .option('--body-bytes <n>', 'body size for --fail huge-body / huge-error (default 200 MiB)')
        .option('--fail-after <n>', 'chunks sent before a mid-stream failure')
        .option('--error-status <status>', 'HTTP status for --fail http-error')
        .option('--reasoning', 'the model thinks: reasoning output before the answer (as qwen3.6)')
        .option('--flavor <flavor>', 'wire shape: ollama (>= 0.32.6, default), ollama-old, vllm')
        .option('--no-responses', 'answer POST /v1/responses 404, as an Ollama before 0.13.3')
        .option('--no-completions', 'answer POST /v1/completions 404, as a server without legacy completions')
        .option('--no-messages', 'answer POST /v1/messages 404, as an Ollama before 0.14')
        .option('--pid-file <file>', "write the simulator's pid here once it listens (removed at exit)")
        .action((o: SimulateOptions) => deps.simulate(o)),
      'ob-proxy simulate --port 11434 --model gemma4:26b',
    ),
  );

  program.addCommand(
    example(
      withCommon(new Command('demo'))
        .description('daemon + simulated instances for both models, ready, with a working key')
        .addOption(settingOption('port'))
        .addOption(settingOption('host'))
        .action((o: DemoOptions) => deps.demo(o)),
      'npm run demo',
      'ob-proxy demo --port 9090',
    ),
  );

  applyRecursively(program, deps);
  return program;
}

function applyRecursively(cmd: Command, deps: CliDeps): void {
  cmd.exitOverride();
  // Commander's errors quote the arguments given, which may come from a script's variables; its
  // "(Did you mean …?)" goes on the error's own line, as every error is one line.
  cmd.configureOutput({
    writeOut: (s) => deps.io.out(s),
    writeErr: (s) =>
      deps.io.err(
        s
          .replace(/\n\(Did you mean (.*)\?\)\n/g, ' (did you mean $1?)\n')
          .split('\n')
          .map(printable)
          .join('\n'),
      ),
  });
  checkMandatoryLast(cmd);
  for (const sub of cmd.commands) applyRecursively(sub, deps);
}

/**
 * Commander reports a missing mandatory option before an unknown one, so `keys create --nme foo`
 * said --name was missing instead of suggesting it. Mandatory options are checked here instead,
 * in a hook that runs after the unknown-option check.
 */
function checkMandatoryLast(cmd: Command): void {
  const mandatory = cmd.options.filter((o) => o.mandatory);
  if (mandatory.length === 0) return;
  for (const o of mandatory) o.mandatory = false;
  cmd.hook('preAction', (_self, action) => {
    if (action !== cmd) return;
    for (const o of mandatory) {
      if (cmd.getOptionValue(o.attributeName()) === undefined) {
        cmd.error(`error: required option '${o.flags}' not specified`, {
          code: 'commander.missingMandatoryOptionValue',
          exitCode: 2,
        });
      }
    }
  });
}

/**
 * No command takes a secret (keys are named by their ids), and every refusal quotes what it
 * refuses: `keys revoke <secret>`, an easy slip when a key has leaked, printed the secret back
 * ("No key …") and left the key active. Refused before anything else, without saying it again.
 */
function refuseSecretArguments(argv: readonly string[]): void {
  for (const arg of argv) {
    const id = keyIdInSecret(arg);
    if (id === null) {
      // Changed in case on the way (a form, a chat tool): not the secret, but its checksum gives
      // the casing back offline, so it is not said back either.
      if (!looksLikeSecret(arg)) continue;
      throw new UsageError(
        "An argument looks like a key's secret (it holds ob_sk_ in some case); no command takes one, and it is not printed back. " +
          'A key is named by its id, the 12 characters after ob_sk_ exactly as `ob-proxy keys list` shows them. ' +
          'If it is a real secret with its case changed, it is now in your shell history and can be recovered from it: revoke that key (`ob-proxy keys revoke <id>`).',
      );
    }
    throw new UsageError(
      `A key's secret was given on the command line; no command takes one. A key is named by its id, the 12 characters after ob_sk_ (here ${id}). ` +
        `The secret is now in your shell history: if it was not meant to be seen there, revoke the key (\`ob-proxy keys revoke ${id}\`).`,
    );
  }
}

/** Parses argv and runs; returns the exit code (0 ok, 1 refused, 2 usage, 3 daemon unreachable). */
export async function runCli(argv: string[], deps: ProgramDeps): Promise<number> {
  const program = makeProgram(deps);
  try {
    refuseSecretArguments(argv);
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof CommanderError) {
      if (err.code === 'commander.helpDisplayed' || err.code === 'commander.version' || err.code === 'commander.help')
        return 0;
      if (err.code === 'commander.executeSubCommandAsync') return 0;
      return 2;
    }
    // The daemon's refusals quote the names and ids they refuse.
    deps.io.err(errorLine(err instanceof Error ? err.message : String(err)));
    if (err instanceof UsageError) return 2;
    if (err instanceof ObProxyError) {
      if (err.code === 'daemon_unreachable') return 3;
      return 1;
    }
    if (debugWanted(deps.io.env) && err instanceof Error && err.stack !== undefined)
      deps.io.err(`${err.stack.split('\n').map(printable).join('\n')}\n`);
    return 1;
  }
}
