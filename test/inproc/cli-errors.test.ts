/**
 * The CLI in process (test/helpers/inproc-cli.ts): exit codes and errors, one line on stderr and
 * stdout empty (1 for the daemon's refusal, 2 for a usage error caught before the daemon is
 * asked, 3 for a daemon out of reach); usage errors naming the flag, with "did you mean";
 * `--pack-ends` checked and taken as a duration; --version and --help; the socket a command
 * reaches.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ok, refused } from '../helpers/cli-outcome.js';
import { type Inproc, MODEL, buildInproc } from '../helpers/inproc.js';
import { FAKE_SOCKET, type InprocCli, inprocCli } from '../helpers/inproc-cli.js';

let d: Inproc;
let cli: InprocCli;

beforeAll(async () => {
  d = await buildInproc();
  cli = inprocCli(d.daemon.management);
  // A pending instance with no endpoint: neither made ready nor given keys.
  expect((await d.manage('POST', '/v1/instances', { id: 'x1', model: MODEL })).status).toBe(201);
});

afterAll(async () => {
  await d?.close();
});

describe('exit codes and errors: one line on stderr, stdout empty', () => {
  it("1 for a refusal, with the daemon's sentence", async () => {
    expect(await cli.run('instances', 'add', '../etc', '--model', MODEL)).toEqual(
      refused(1, 'Instance id must be 1-64 characters: letters, digits, and . _ : - (not first).'),
    );
    expect(await cli.run('instances', 'ready', 'x1')).toEqual(
      refused(1, 'Instance "x1" has no endpoint: give --endpoint URL (the model server\'s base URL).'),
    );
    expect(await cli.run('keys', 'create', '--instance', 'x1', '--name', 'a')).toEqual(
      refused(1, 'Instance "x1" is pending; keys can be created only for a ready instance.'),
    );
    expect(await cli.run('instances', 'add', 'x9', '--model', 'llama3', '--json')).toEqual(
      refused(
        1,
        'Model "llama3" is not allowed: the allowed models are gemma4:26b, qwen3.6:27b. Allow it first with `ob-proxy models allow llama3`.',
      ),
    );
  });

  it('2 for a usage error, checked before the daemon is asked', async () => {
    const asked = cli.client.paths.length;
    expect(await cli.run('instances', 'add', 'x2', '--model', MODEL, '--pack-ends', 'tomorrow')).toEqual(
      refused(
        2,
        '--pack-ends must be an ISO 8601 time with a zone (2026-12-01T18:00:00Z) or a duration from now (+8h, +30d, +90m), got "tomorrow".',
      ),
    );
    expect(await cli.run('keys', 'create', '--instance', 'x')).toEqual(
      refused(2, "required option '--name <name>' not specified"),
    );
    expect(await cli.run('keys', 'create', '--nme', 'foo')).toEqual(
      refused(2, "unknown option '--nme' (did you mean --name?)"),
    );
    expect(await cli.run('keys', 'limit', 'k00000000002')).toEqual(
      refused(2, 'Give at least one of --rpm, --tpm, --concurrency (a number, or none).'),
    );
    expect(await cli.run('instancs')).toEqual(refused(2, "unknown command 'instancs' (did you mean instances?)"));
    expect(cli.client.paths.length).toBe(asked);
  });

  it('3 when the daemon cannot be reached, with the hint to start it', async () => {
    const down = inprocCli(null);
    expect(await down.run('instances', 'list', '--json')).toEqual(
      refused(
        3,
        `Cannot reach the ob-proxy daemon at ${FAKE_SOCKET} (ECONNREFUSED). Start it with \`ob-proxy serve\`, or pass the right --home/--socket.`,
      ),
    );
  });

  it("--version and --help exit 0; every command's help shows an example", async () => {
    expect(await cli.run('--version')).toEqual(ok('0.0.0-test\n'));
    for (const cmd of [
      ['serve'],
      ['instances', 'add'],
      ['instances', 'ready'],
      ['instances', 'stop'],
      ['keys', 'create'],
      ['keys', 'list'],
      ['keys', 'reveal'],
      ['revocations'],
      ['usage'],
      ['status'],
      ['simulate'],
      ['demo'],
      ['console'],
    ]) {
      const r = await cli.run(...cmd, '--help');
      expect([r.code, r.stderr], cmd.join(' ')).toEqual([0, '']);
      expect(r.stdout, cmd.join(' ')).toMatch(/Examples?:\n {2}\$ /);
    }
  });
});

describe('the socket a command reaches', () => {
  it('--socket, else <--home>/ob-proxy.sock, else ~/.ob-proxy/ob-proxy.sock', async () => {
    const c = inprocCli(d.daemon.management, { homedir: '/home/op' });
    await c.run('status', '--json');
    await c.run('status', '--json', '--home', '/srv/ob');
    await c.run('status', '--json', '--home', '/srv/ob', '--socket', '/run/ob.sock');
    expect(c.connected).toEqual(['/home/op/.ob-proxy/ob-proxy.sock', '/srv/ob/ob-proxy.sock', '/run/ob.sock']);
  });
});

describe('usage errors name the flag', () => {
  it('a misspelt flag or command gets "did you mean", before any missing-option complaint', async () => {
    expect(await cli.run('keys', 'create', '--nme', 'foo', '--instance', 'x')).toEqual(
      refused(2, "unknown option '--nme' (did you mean --name?)"),
    );
    expect(await cli.run('instances', 'lst')).toEqual(refused(2, "unknown command 'lst' (did you mean list?)"));
    expect(await cli.run('instancs', 'list')).toEqual(
      refused(2, "unknown command 'instancs' (did you mean instances?)"),
    );
    expect(await cli.run('instances', 'stop', 'x', '--yse')).toEqual(
      refused(2, "unknown option '--yse' (did you mean --yes?)"),
    );
  });

  it('a bad or past --pack-ends is exit 2 naming --pack-ends, never the JSON field; nothing is asked of the daemon', async () => {
    const asked = cli.client.paths.length;
    for (const bad of ['tomorrow', '2030-02-30T00:00:00Z', '+8x', '2020-01-01T00:00:00Z']) {
      const r = await cli.run('instances', 'add', 'bad-date', '--model', MODEL, '--pack-ends', bad);
      expect([r.code, r.stdout], bad).toEqual([2, '']);
      expect(r.stderr, bad).toMatch(/^error: --pack-ends .*\n$/);
      expect(r.stderr, bad).not.toContain('packEndsAt');
    }
    const extend = await cli.run('instances', 'extend', 'bad-date', '--pack-ends', 'next week');
    expect([extend.code, extend.stderr]).toEqual([2, expect.stringMatching(/^error: --pack-ends .*"next week"\.\n$/)]);
    expect(cli.client.paths.length).toBe(asked);
  });

  it('--pack-ends takes a duration from now', async () => {
    const before = Date.now();
    const added = await cli.json<{ packEndsAt: string }>(
      'instances',
      'add',
      'dur',
      '--model',
      MODEL,
      '--pack-ends',
      '+8h',
    );
    const after = Date.now();
    expect(Date.parse(added.packEndsAt)).toBeGreaterThanOrEqual(before + 8 * 3_600_000);
    expect(Date.parse(added.packEndsAt)).toBeLessThanOrEqual(after + 8 * 3_600_000);
    const extended = await cli.json<{ packEndsAt: string }>('instances', 'extend', 'dur', '--pack-ends', '+30d');
    expect(Date.parse(extended.packEndsAt)).toBeGreaterThanOrEqual(before + 30 * 86_400_000);
    // Sooner than the 30 days just set: only on purpose.
    const mixed = await cli.json<{ packEndsAt: string }>(
      'instances',
      'extend',
      'dur',
      '--pack-ends',
      '+1d12h',
      '--shorten',
    );
    expect(Date.parse(mixed.packEndsAt)).toBeGreaterThanOrEqual(before + 36 * 3_600_000);
    expect(Date.parse(mixed.packEndsAt)).toBeLessThan(before + 30 * 86_400_000);
  });
});
