/**
 * `ob-proxy console`: the Ink app on the real terminal. Loaded lazily by bin/ob-proxy.ts, so the
 * other commands never load Ink or React.
 */
import { render } from 'ink';
import { DaemonClient } from '../daemon-client.js';
import { UsageError } from '../program.js';
import { ConsoleApp } from './console-app.js';
import { KeystrokeInput } from './keystroke-input.js';
import { colourWanted } from './theme.js';

export async function runConsole(socketPath: string, opts: { json?: boolean }): Promise<void> {
  if (opts.json === true) {
    throw new UsageError('The console is interactive and has no --json output; use `ob-proxy instances list --json` or `ob-proxy keys list --json`.');
  }
  if (process.stdin.isTTY !== true || process.stdout.isTTY !== true) {
    throw new UsageError('The console needs an interactive terminal. In scripts, use `ob-proxy instances`, `ob-proxy keys` and `ob-proxy revocations`.');
  }
  const client = new DaemonClient(socketPath);
  const input = new KeystrokeInput(process.stdin);
  const app = render(<ConsoleApp client={client} colour={colourWanted(process.env, true)} />, {
    stdin: input as unknown as NodeJS.ReadStream,
    exitOnCtrlC: true,
    patchConsole: true,
    // Ink turns itself non-interactive under CI=true; this is a terminal, checked above.
    interactive: true,
    // Like vim or htop: nothing the console drew (a secret included) stays in the scrollback.
    alternateScreen: true,
    incrementalRendering: true,
  });
  try {
    await app.waitUntilExit();
  } finally {
    input.close();
    await client.close().catch(() => {});
  }
}
