/**
 * Logs a person can read: JSON lines with ISO 8601 times for machines, pino-pretty
 * for people (`--log-format pretty`), from the same records.
 */
import { spawn } from 'node:child_process';
import { afterEach, expect, it } from 'vitest';
import { BIN, NODE, startServe, tmpHome, type ServeProcess } from '../helpers/processes.js';

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
