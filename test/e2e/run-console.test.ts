/**
 * `ob-proxy console` outside a terminal: a usage error (exit 2) with what to use instead,
 * never a stack and never a half-drawn screen.
 */
import { describe, expect, it } from 'vitest';
import { runCli, tmpHome } from '../helpers/processes.js';

describe('ob-proxy console (process)', () => {
  it('when stdin and stdout are not a terminal then it exits 2 and points to the scriptable commands', async () => {
    const r = await runCli(['console'], { home: await tmpHome() });
    expect(r).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'error: The console needs an interactive terminal. In scripts, use `ob-proxy instances`, `ob-proxy keys` and `ob-proxy revocations`.\n',
    });
  });

  it('when --json is given then it exits 2: the console has no JSON output', async () => {
    const r = await runCli(['console', '--json'], { home: await tmpHome() });
    expect(r).toEqual({
      code: 2,
      stdout: '',
      stderr:
        'error: The console is interactive and has no --json output; use `ob-proxy instances list --json` or `ob-proxy keys list --json`.\n',
    });
  });
});
