/**
 * Logs a person can read: JSON lines with ISO 8601 times for machines, pino-pretty
 * for people (`--log-format pretty`), from the same records.
 */
import { spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { BIN, eventually, NODE, type ServeProcess, startServe, tmpHome } from '../helpers/processes.js';

let serve: ServeProcess | undefined;
afterEach(async () => {
  await serve?.stop();
  serve = undefined;
});

it('JSON lines carry ISO 8601 times', async () => {
  serve = await startServe(await tmpHome(), ['--log-format', 'json']);
  const line = serve.logs().find((l) => l.msg === 'ob-proxy serving');
  expect(line?.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
});

it('--log-format pretty prints lines for people, and refuses an unknown format with exit 2', async () => {
  const home = await tmpHome();
  const proc = spawn(NODE, [BIN, 'serve', '--home', home, '--port', '0', '--log-format', 'pretty'], {
    env: { ...process.env, NO_COLOR: '1' },
  });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (s: string) => {
    out += s;
  });
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no pretty line: ${out}`)), 15_000);
    proc.stdout.on('data', () => {
      if (out.includes('ob-proxy serving')) {
        clearTimeout(t);
        resolve();
      }
    });
  });
  proc.kill('SIGTERM');
  await new Promise((r) => proc.once('exit', r));
  const line = out.split('\n').find((l) => l.includes('ob-proxy serving'))!;
  expect(line).toMatch(/^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} [+-]\d{4}\] INFO: ob-proxy serving/);
  expect(() => JSON.parse(line) as unknown).toThrow();

  const bad = spawn(NODE, [BIN, 'serve', '--home', home, '--port', '0', '--log-format', 'xml']);
  let err = '';
  bad.stderr.setEncoding('utf8').on('data', (s: string) => {
    err += s;
  });
  const code = await new Promise<number | null>((r) => bad.once('exit', r));
  expect(code).toBe(2);
  expect(err).toContain('--log-format (or OB_PROXY_LOG_FORMAT) must be json or pretty, got "xml".');
});

/**
 * Regression (management plane, operators' terminals): `serve` at a terminal logs in pino-pretty's
 * format (--log-format pretty, the default there). pino-pretty parses each JSON line again, which
 * turned the \u escapes of C1 and bidi characters back into the characters: an endpoint from a
 * hand-edited store, logged when its probe failed, wrote U+009B (a one-byte CSI) and U+202E raw
 * to the operator's terminal, where docs/security.md promised escapes. The pretty lines are now
 * escaped too: every such character is shown as a \u escape, as in the JSON log. (A line
 * separator is not tried: it is refused in an endpoint when the store is loaded.)
 */
describe('the pretty log escapes C1 and bidi characters', () => {
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
});
