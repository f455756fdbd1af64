/**
 * npm test's tier starts no Node as a child (test/helpers/in-process-only.ts, a setup file of the
 * fast projects): the binary, a daemon or a simulator started here fails at the call, with where
 * such a test goes. Other programs still run.
 */
import { execFile, execFileSync, fork, spawn, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { BIN, runCli } from '../helpers/processes.js';

const REFUSED = /npm test runs in process\. .*or move this file under test\/e2e\/ \(npm run test:e2e\)\.$/;

it('when a test starts Node, by any of child_process, then the call throws and names the e2e tier', async () => {
  expect(() => spawn(process.execPath, [BIN, '--version'])).toThrow(REFUSED);
  expect(() => spawnSync('node', ['-e', '1'])).toThrow(REFUSED);
  expect(() => execFileSync(process.execPath, ['-e', '1'])).toThrow(REFUSED);
  expect(() => fork(BIN, ['--version'])).toThrow(REFUSED);
  await expect(promisify(execFile)(process.execPath, ['-e', '1'])).rejects.toThrow(REFUSED);
  // The helper the end-to-end tests use to run the CLI binary.
  await expect(runCli(['--version'])).rejects.toThrow(REFUSED);
});

it('when a test runs another program then it runs', async () => {
  expect(execFileSync('sh', ['-c', 'echo ok']).toString()).toBe('ok\n');
  expect((await promisify(execFile)('sh', ['-c', 'echo ok'])).stdout).toBe('ok\n');
});
