/**
 * Regression: an endpoint carrying credentials that did not parse as a URL (a port out of range,
 * a password with a character URLs do not take) was quoted whole in the refusal:
 * `Endpoint "http://ops:hunter2@10.0.0.5:99999" is not a URL`, the password in clear on stderr,
 * in the terminal's scrollback and in the logs of the script that ran it. Now the refusal quotes
 * the endpoint without what stands before its last @ and after a ? or #.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';
import { type Harness, startHarness } from '../reliability/harness.js';

let d: Harness;
let cli: InprocCli;
beforeAll(async () => {
  d = await startHarness();
  cli = inprocCli(d.daemon.management);
});
afterAll(async () => {
  await d?.stop();
});

const HINT = "is not a URL; give the model server's base URL, e.g. http://10.0.0.5:11434.";

it('quotes an endpoint that is not a URL without its password or token', async () => {
  const cases: [string, string][] = [
    ['http://ops:hunter2@10.0.0.5:99999', 'http://…@10.0.0.5:99999'],
    ['http://ops:hun/ter#2@10.0.0.5:99999', 'http://…@10.0.0.5:99999'],
    ['http://10.0.0.5:99999/?api_key=hunter2', 'http://10.0.0.5:99999/?…'],
    ['https://ops:hunter2@[fd00::5:11434', 'https://…@[fd00::5:11434'],
  ];
  for (const [endpoint, quoted] of cases) {
    for (const args of [
      ['instances', 'add', 'gpu-1', '--model', 'gemma4:26b', '--endpoint', endpoint],
      ['instances', 'add', 'gpu-1', '--model', 'gemma4:26b', '--endpoint', endpoint, '--json'],
    ]) {
      const r = await cli.run(...args);
      expect({ endpoint, code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({
        endpoint,
        code: 1,
        stdout: '',
        stderr: `error: Endpoint "${quoted}" ${HINT}\n`,
      });
    }
  }
  expect((await cli.run('instances', 'add', 'gpu-1', '--model', 'gemma4:26b')).code).toBe(0);
  const ready = await cli.run('instances', 'ready', 'gpu-1', '--endpoint', 'http://ops:hunter2@10.0.0.5:99999');
  expect([ready.code, ready.stdout, ready.stderr]).toEqual([
    1,
    '',
    `error: Endpoint "http://…@10.0.0.5:99999" ${HINT}\n`,
  ]);
  expect(d.rawLogs.filter((l) => l.includes('hunter2'))).toEqual([]);
});
