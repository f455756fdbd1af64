/**
 * `--wait` on a store this daemon alone serves (here a memory store, as a file store): the
 * revocation holds once the command returns, so it is confirmed at once. And its usage errors.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';

let d: Inproc;
let sim: Simulator;
let cli: InprocCli;

beforeAll(async () => {
  d = await buildInproc();
  const started = await startSim();
  sim = started.sim;
  cli = inprocCli(d.daemon.management);
  await cli.run('instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', started.url);
  await cli.run('instances', 'ready', 'gpu-1');
  await cli.run('keys', 'create', '--instance', 'gpu-1', '--name', 'bot');
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

const ALONE = { shared: false, newestRevocation: null, daemons: [], notShared: [], confirmed: true };

it('keys revoke --wait is confirmed at once', async () => {
  expect(await cli.run('keys', 'revoke', 'k00000000002', '--wait')).toEqual({
    code: 0,
    stdout:
      'Revoked key k00000000002 ("bot") of instance gpu-1. It answers 401 from now on.\nConfirmed: this daemon is the only one of its store.\n',
    stderr: '',
  });
});

it('instances stop --wait --json: the instance and the confirmation, over every revoked key of it', async () => {
  const r = await cli.run('instances', 'stop', 'gpu-1', '--yes', '--wait', '--json');
  expect(r.code).toBe(0);
  expect(JSON.parse(r.stdout)).toEqual({
    ...JSON.parse((await cli.run('instances', 'show', 'gpu-1', '--json')).stdout),
    confirmation: { ...ALONE, keys: ['k00000000001', 'k00000000002'], waitedMs: expect.any(Number) },
  });
});

it('--wait-timeout goes with --wait, and takes seconds', async () => {
  expect(await cli.run('keys', 'revoke', 'k00000000001', '--wait-timeout', '5')).toEqual({
    code: 2,
    stdout: '',
    stderr: 'error: --wait-timeout goes with --wait.\n',
  });
  expect(await cli.run('instances', 'remove', 'gpu-1', '--yes', '--wait', '--wait-timeout', 'soon')).toEqual({
    code: 2,
    stdout: '',
    stderr:
      'error: --wait-timeout (or OB_PROXY_WAIT_TIMEOUT) must be a number of seconds from 0.1 to 3600, got "soon".\n',
  });
  // Refused before anything was asked of the daemon.
  expect(d.daemon.ctx.lifecycle.registry.instances.get('gpu-1')?.state).toBe('stopped');
});

it('GET /v1/confirmations refuses a query it does not know', async () => {
  const res = await d.daemon.management.inject({ method: 'GET', url: '/v1/confirmations?key=x' });
  expect(res.statusCode).toBe(400);
  expect(res.json()).toMatchObject({ error: { code: 'invalid_argument' } });
});
