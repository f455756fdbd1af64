/**
 * Bad input to the management API and the CLI: ids, names and dates that are empty, huge,
 * control characters, unicode, path-like are refused with a short sentence (the CLI's in one
 * stderr line), and nothing is added or touched.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { Simulator } from '../../simulator/simulator.js';
import { runCli } from '../helpers/processes.js';
import { type Harness, MODEL, readyInstance, startHarness, startSim } from './harness.js';

let h: Harness;
let sim: Simulator;
let client: DaemonClient;

beforeAll(async () => {
  h = await startHarness({ badKeyLimit: 0, bodyLimit: 256 * 1024 });
  const s = await startSim({ chunks: 2 });
  sim = s.sim;
  await readyInstance(h, 'fuzz', s.url);
  client = new DaemonClient(h.config.socket);
});

afterAll(async () => {
  await client.close();
  await h.stop();
  await sim.close();
});

describe('management API: ids, names and dates', () => {
  const bad = [
    '',
    ' ',
    'a'.repeat(65),
    'a'.repeat(100_000),
    'x\u0000y',
    'x\ny',
    '\u001b[31mred',
    'ü',
    '日本',
    '🔑',
    '../etc/passwd',
    'a/b',
    '..',
    '.hidden',
    '-rf',
    'a b',
    'a\\b',
    '%2e%2e',
  ];

  async function refused(p: Promise<unknown>, param: string): Promise<string> {
    const err = await p.then(
      () => null,
      (e: unknown) => e as { code?: string; param?: string | null; message: string; status?: number },
    );
    expect(err, 'refused').not.toBeNull();
    expect({ code: err?.code, param: err?.param }).toEqual({ code: 'invalid_argument', param });
    expect(err?.message.length).toBeLessThan(300); // a sentence, not an echo of a huge input
    return err?.message ?? '';
  }

  it('instance ids that are empty, huge, control, unicode or path-like are refused, and nothing is added', async () => {
    const before = (await client.listInstances()).length;
    for (const id of bad) await refused(client.addInstance({ id, model: MODEL }), 'id');
    await fc.assert(
      fc.asyncProperty(
        fc.string({ unit: 'binary', maxLength: 80 }).filter((s) => !/^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$/.test(s)),
        async (id) => {
          await refused(client.addInstance({ id, model: MODEL }), 'id');
        },
      ),
      { numRuns: 100 },
    );
    for (const id of [42, null, true, ['a'], { a: 1 }])
      await refused(client.call('POST', '/v1/instances', { id, model: MODEL }), 'id');
    expect((await client.listInstances()).length).toBe(before);
  });

  it('path-like ids in URLs find nothing and touch nothing', async () => {
    for (const id of ['..', '../fuzz', '%2e%2e', 'fuzz/../fuzz', 'fuzz%00', 'a'.repeat(5000)]) {
      for (const action of ['stop', 'fail', 'terminate', 'pending', 'ready'] as const) {
        const err = await client.call('POST', `/v1/instances/${encodeURIComponent(id)}/${action}`, {}).then(
          () => null,
          (e: unknown) => e as { code: string },
        );
        expect(['instance_not_found', 'invalid_argument']).toContain(err?.code);
      }
      const keyErr = await client.revokeKey(id).then(
        () => null,
        (e: unknown) => e as { code: string },
      );
      expect(['key_not_found', 'invalid_argument']).toContain(keyErr?.code);
    }
    expect((await client.getInstance('fuzz')).state).toBe('ready');
  });

  it('key names: empty, huge, control or invisible characters are refused; ordinary unicode is kept', async () => {
    for (const name of [
      '',
      '   ',
      'a'.repeat(65),
      'a'.repeat(100_000),
      'x\u0000',
      'x\ny',
      '\u001b[2J',
      'evil\u202egnp.exe',
      'zero\u200bwidth',
      'x\u2028y',
    ]) {
      await refused(client.createKey('fuzz', name), 'name');
    }
    for (const name of [42, null, ['a'], { a: 1 }])
      await refused(client.call('POST', '/v1/keys', { instance: 'fuzz', name }), 'name');
    for (const name of ['clé 🔑', '日本語のキー', '../../etc/passwd', 'a/b\\c']) {
      const k = await client.createKey('fuzz', name);
      expect(k.name).toBe(name);
    }
  });

  it('dates: anything but an ISO 8601 time with a zone, in the future, is refused', async () => {
    await client.addInstance({ id: 'dated', model: MODEL });
    for (const packEndsAt of [
      '',
      'tomorrow',
      '2030-01-01',
      '2030-13-01T00:00:00Z',
      '2030-01-01T00:00:00',
      '1999-01-01T00:00:00Z',
      '+275760-09-13T00:00:00Z',
      '2030-01-01T00:00:00Z\n',
      'a'.repeat(10_000),
      '2030-02-30T00:00:00Z',
    ]) {
      const err = await client.extend('dated', packEndsAt).then(
        () => null,
        (e: unknown) => e as { code: string; param: string },
      );
      expect({ v: packEndsAt.slice(0, 40), code: err?.code, param: err?.param }).toEqual({
        v: packEndsAt.slice(0, 40),
        code: 'invalid_argument',
        param: 'packEndsAt',
      });
    }
    for (const packEndsAt of [42, null, {}])
      await refused(client.call('POST', '/v1/instances/dated/extend', { packEndsAt }), 'packEndsAt');
    expect((await client.getInstance('dated')).packEndsAt).toBeNull();
  });
});

describe('the CLI refuses bad input with one clear line', () => {
  it('exit 1 (refused) or 2 (a bad date: usage) and one stderr line for each bad id, name and date', async () => {
    const home = h.home;
    const cases: [string[], RegExp, number][] = [
      [['instances', 'add', '../x', '--model', MODEL], /Instance id must be/, 1],
      [['instances', 'add', 'a'.repeat(300), '--model', MODEL], /Instance id must be/, 1],
      [['instances', 'add', 'é', '--model', MODEL], /Instance id must be/, 1],
      [['keys', 'create', '--instance', 'fuzz', '--name', 'x\u001b[2Jy'], /control or invisible/, 1],
      [['keys', 'create', '--instance', 'fuzz', '--name', ''], /must not be empty|required/, 1],
      [['instances', 'extend', 'fuzz', '--pack-ends', 'next week'], /--pack-ends must be an ISO 8601/, 2],
    ];
    for (const [args, message, code] of cases) {
      const r = await runCli([...args, '--socket', h.config.socket], { home });
      expect({ args: args.join(' ').slice(0, 60), code: r.code, stdout: r.stdout }).toEqual({
        args: args.join(' ').slice(0, 60),
        code,
        stdout: '',
      });
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).toMatch(message);
    }
  });
});
