/**
 * Regression (management plane, operators' terminals): `serve` at a terminal logs in pino-pretty's
 * format (--log-format pretty, the default there). pino-pretty parses each JSON line again, which
 * turned the \u escapes of C1 and bidi characters back into the characters: an endpoint from a
 * hand-edited store, logged when its probe failed, wrote U+009B (a one-byte CSI) and U+202E raw
 * to the operator's terminal, where docs/security.md promised escapes. The pretty lines are now
 * escaped too: every such character is shown as a \u escape, as in the JSON log. (A line
 * separator is not tried: it is refused in an endpoint when the store is loaded.)
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { BIN, NODE, eventually, tmpHome } from '../../helpers/processes.js';

const HOSTILE = 'x\u009b2J\u202ey\u001b]0;t\u0007\u200b';
const AT = '2026-11-23T10:00:00.000Z';
const STORE = {
  version: 2,
  instances: [
    {
      id: 'gpu-1',
      deployment: 'dep-1',
      model: 'gemma4:26b',
      // Port 9 (discard) refuses: the probe at start fails and logs the endpoint.
      endpoint: `http://127.0.0.1:9/${HOSTILE}`,
      state: 'ready',
      packEndsAt: null,
      createdAt: AT,
      updatedAt: AT,
    },
  ],
  keys: [],
  events: [],
};

// eslint-disable-next-line no-control-regex
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u00ad\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/u;

it('a pretty log line shows C1, bidi and zero-width characters as escapes', async () => {
  const home = await tmpHome();
  await writeFile(join(home, 'db.json'), JSON.stringify(STORE), { mode: 0o600 });
  const proc = spawn(NODE, [BIN, 'serve', '--home', home, '--port', '0', '--log-format', 'pretty'], {
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (s: string) => (out += s));
  let err = '';
  proc.stderr.setEncoding('utf8').on('data', (s: string) => (err += s));
  const exited = new Promise((resolve) => proc.once('exit', resolve));
  try {
    await eventually(
      () => proc.exitCode !== null || /model server probe failed[\s\S]*error: .*\n/.test(out),
      'the failed probe logged',
      15_000,
    );
  } finally {
    proc.kill('SIGTERM');
    await exited;
  }
  expect(err).toBe('');
  const lines = out.split('\n');
  for (const line of lines) expect(RAW.test(line), JSON.stringify(line)).toBe(false);
  const shown = 'http://127.0.0.1:9/x\\u009b2J\\u202ey\\u001b]0;t\\u0007\\u200b';
  expect(lines).toContain(`    endpoint: "${shown}"`);
  expect(out).toContain('INFO: ob-proxy serving');
});
