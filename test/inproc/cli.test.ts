/**
 * The CLI in process: `runCli` with a DaemonClient that reaches a never-listening daemon through
 * `inject()` (test/helpers/inproc-cli.ts). Whole outputs of the main commands, human and --json,
 * exit codes, usage errors, confirmations and help. The real binary over the real socket runs
 * once in test/e2e/lifecycle-cli.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, T0, buildInproc, startSim } from '../helpers/inproc.js';
import { FAKE_SOCKET, type InprocCli, inprocCli } from '../helpers/inproc-cli.js';

const AT = new Date(T0).toISOString();
const DEFAULT_SECRET = 'ob_sk_k00000000001_r00000000000000000000000000000010EdnTO';
const BOT_SECRET = 'ob_sk_k00000000002_r00000000000000000000000000000024Y3TlC';
// No base URL before listen(), so no "Use it with any OpenAI SDK" line; its blank line stays.
const SHOWN_ONCE = '  This secret is shown once and stored only as a hash. Save it now.\n\n';

let d: Inproc;
let sim: Simulator;
let simUrl: string;
let cli: InprocCli;

beforeAll(async () => {
  d = await buildInproc();
  ({ sim, url: simUrl } = await startSim());
  cli = inprocCli(d.daemon.management);
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

const ok = (stdout: string): unknown => ({ code: 0, stdout, stderr: '' });
const refused = (code: number, message: string): unknown => ({ code, stdout: '', stderr: `error: ${message}\n` });

describe('the main commands, as a person reads them', () => {
  it('status and an empty list', async () => {
    expect(await cli.run('status')).toEqual(
      ok(
        [
          `daemon   ob-proxy test, pid ${process.pid}, since ${AT}`,
          'serving',
          `socket   ${d.config.socket}`,
          'models   gemma4:26b, qwen3.6:27b',
          'store    memory (this daemon only)',
          '',
        ].join('\n'),
      ),
    );
    expect(await cli.run('instances', 'list')).toEqual(
      ok('No instances. Add one with `ob-proxy instances add <id> --model <model> --endpoint <url>`.\n'),
    );
  });

  it('instances add, ready (the secret once), list, show', async () => {
    expect(await cli.run('instances', 'add', 'gpu-1', '--model', MODEL, '--endpoint', simUrl)).toEqual(
      ok('Added instance gpu-1 (gemma4:26b), state pending. Make it ready with `ob-proxy instances ready gpu-1`.\n'),
    );
    expect(await cli.run('instances', 'add', 'x1', '--model', MODEL)).toEqual(
      ok(
        'Added instance x1 (gemma4:26b), state pending. Make it ready with `ob-proxy instances ready x1 --endpoint <url>`.\n',
      ),
    );
    expect(await cli.run('instances', 'ready', 'gpu-1')).toEqual(
      ok(
        `Instance gpu-1 is ready (gemma4:26b at ${simUrl}).\n\nDefault key "default" (id k00000000001):\n\n  ${DEFAULT_SECRET}\n\n${SHOWN_ONCE}`,
      ),
    );
    expect(await cli.run('instances', 'list')).toEqual(
      ok(
        [
          'ID     MODEL       STATE    HEALTH     KEYS  ENDPOINT                PACK ENDS',
          `gpu-1  gemma4:26b  ready    reachable  1     ${simUrl}  -`,
          'x1     gemma4:26b  pending  -          0     -                       -',
          '',
        ].join('\n'),
      ),
    );
    expect(await cli.run('instances', 'show', 'gpu-1')).toEqual(
      ok(
        [
          'id           gpu-1',
          'model        gemma4:26b',
          'state        ready',
          `endpoint     ${simUrl}`,
          'health       reachable',
          'pack ends    -',
          'active keys  1',
          `created      ${AT}`,
          `updated      ${AT}`,
          '',
        ].join('\n'),
      ),
    );
  });

  it('keys create (with limits, and -q), limit, list never showing a secret, revoke, revocations', async () => {
    expect(await cli.run('keys', 'create', '--instance', 'gpu-1', '--name', 'ci-bot', '--rpm', '60')).toEqual(
      ok(`Key "ci-bot" (id k00000000002) for instance gpu-1:\n\n  ${BOT_SECRET}\n\n${SHOWN_ONCE}Limits: rpm 60.\n`),
    );
    expect(await cli.run('keys', 'create', '--instance', 'gpu-1', '--name', 'q', '-q')).toEqual(
      ok('ob_sk_k00000000003_r000000000000000000000000000000339DUle\n'),
    );
    expect(await cli.run('keys', 'limit', 'k00000000002', '--concurrency', '2', '--rpm', 'none')).toEqual(
      ok('Limits of key k00000000002 ("ci-bot"): concurrency 2.\n'),
    );
    expect(await cli.run('keys', 'list')).toEqual(
      ok(
        [
          'ID            NAME     INSTANCE  STATUS  HINT         DEFAULT  CREATED                   LAST USED  REQUESTS  LIMITS',
          `k00000000001  default  gpu-1     active  ob_sk_…dnTO  yes      ${AT}  -          0         -`,
          `k00000000002  ci-bot   gpu-1     active  ob_sk_…3TlC           ${AT}  -          0         concurrency 2`,
          `k00000000003  q        gpu-1     active  ob_sk_…DUle           ${AT}  -          0         -`,
          '',
        ].join('\n'),
      ),
    );
    expect(await cli.run('keys', 'revoke', 'k00000000002')).toEqual(
      ok('Revoked key k00000000002 ("ci-bot") of instance gpu-1. It answers 401 from now on.\n'),
    );
    expect(await cli.run('revocations')).toEqual(
      ok(
        `REVOKED AT                KEY           NAME    INSTANCE  REASON\n${AT}  k00000000002  ci-bot  gpu-1     manual\n`,
      ),
    );
  });

  it('usage: one receipt per pack', async () => {
    const r = await cli.run('usage');
    const deployment = d.daemon.ctx.lifecycle.registry.instances.get('gpu-1')!.deployment;
    expect(r).toEqual(
      ok(
        [
          `Instance gpu-1, deployment ${deployment} (gemma4:26b, ready)`,
          'KEY           NAME     STATUS   REQUESTS  PROMPT  COMPLETION  REASONING  ESTIMATED  ERRORS  DISCONNECTS  FIRST USE  LAST USE',
          'k00000000001  default  active   0         0       0           0          0          0       0            -          -',
          'k00000000002  ci-bot   revoked  0         0       0           0          0          0       0            -          -',
          'k00000000003  q        active   0         0       0           0          0          0       0            -          -',
          'TOTAL         3 keys            0         0       0           0          0          0       0            -          -',
          '',
        ].join('\n'),
      ),
    );
  });

  it('pending keeps the keys; ready again makes no new default key; stop; ready --no-wait; extend; remove', async () => {
    expect(await cli.run('instances', 'pending', 'gpu-1')).toEqual(
      ok('Instance gpu-1 is now pending. Its 2 key(s) stay active and answer 409 until it is ready.\n'),
    );
    expect((await d.chat(DEFAULT_SECRET, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] })).status).toBe(
      409,
    );
    expect(await cli.run('instances', 'ready', 'gpu-1')).toEqual(
      ok(
        `Instance gpu-1 is ready (gemma4:26b at ${simUrl}).\nIts keys are still active; no new default key was made.\n`,
      ),
    );
    expect((await d.chat(DEFAULT_SECRET, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] })).status).toBe(
      200,
    );
    expect(await cli.run('instances', 'stop', 'gpu-1')).toEqual(
      ok('Instance gpu-1 is now stopped. All its keys are revoked.\n'),
    );
    expect(await cli.run('instances', 'ready', 'gpu-1', '--no-wait')).toEqual(
      ok(
        `Instance gpu-1 is ready (gemma4:26b at ${simUrl}).\nThe default key is being created; reveal it once with \`ob-proxy keys reveal <key-id>\` (see \`ob-proxy keys list\`) or in the console.\n`,
      ),
    );
    expect(await cli.run('instances', 'extend', 'gpu-1', '--pack-ends', '2099-01-01T00:00:00Z')).toEqual(
      ok('Pack of gpu-1 now ends 2099-01-01T00:00:00.000Z; its 1 key(s) keep working.\n'),
    );
  });

  it('after ready --no-wait the default secret is revealed once, then refused', async () => {
    const keys = await cli.json<{ id: string; revealable: boolean; status: string }[]>(
      'keys',
      'list',
      '--instance',
      'gpu-1',
    );
    const fresh = keys.filter((k) => k.revealable);
    expect(fresh).toHaveLength(1);
    const shown = await cli.json<{ secret: string; name: string }>('keys', 'reveal', fresh[0]!.id);
    expect(shown).toMatchObject({ name: 'default', secret: expect.stringMatching(/^ob_sk_/) });
    expect((await d.chat(shown.secret, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] })).status).toBe(
      200,
    );
    expect(await cli.run('keys', 'reveal', fresh[0]!.id)).toEqual(
      refused(
        1,
        `The secret of key ${fresh[0]!.id} cannot be shown: it was already displayed, or the daemon restarted since it was made. Create a new key with \`ob-proxy keys create\`.`,
      ),
    );
    expect(await cli.run('instances', 'remove', 'gpu-1')).toEqual(
      ok('Removed instance gpu-1. All its keys are revoked; they answer 404 deployment_not_found.\n'),
    );
  });
});

describe("--json: exactly the daemon's views on stdout", () => {
  it("instances add, list, show and keys create print the management plane's answers", async () => {
    const added = await cli.json<Record<string, unknown>>(
      'instances',
      'add',
      'j1',
      '--model',
      MODEL,
      '--endpoint',
      `${simUrl}/v1`,
    );
    expect(added).toEqual({
      id: 'j1',
      model: MODEL,
      endpoint: simUrl,
      state: 'pending',
      packEndsAt: null,
      upstreamTokenFile: null,
      activeKeys: 0,
      createdAt: AT,
      updatedAt: AT,
      health: null,
    });
    expect(await cli.json('instances', 'show', 'j1')).toEqual(added);
    expect(await cli.json('instances', 'list', '--state', 'pending')).toEqual([
      added,
      (await d.manage('GET', '/v1/instances/x1')).json,
    ]);
    const ready = await cli.json<{ defaultKey: { id: string; name: string; secret: string } }>(
      'instances',
      'ready',
      'j1',
    );
    expect(ready.defaultKey).toEqual({
      id: expect.any(String),
      name: 'default',
      secret: expect.stringMatching(/^ob_sk_/),
    });
    const created = await cli.json<Record<string, unknown>>(
      'keys',
      'create',
      '--instance',
      'j1',
      '--name',
      'json-bot',
      '--tpm',
      '1000',
    );
    expect(created).toMatchObject({
      name: 'json-bot',
      instance: 'j1',
      status: 'active',
      isDefault: false,
      limits: { rpm: null, tpm: 1000, concurrency: null },
      secret: expect.stringMatching(/^ob_sk_/),
    });
    expect(await cli.json('keys', 'list', '--instance', 'j1')).toEqual(
      (await d.manage('GET', '/v1/keys?instance=j1')).json,
    );
    expect(await cli.json('status')).toEqual((await d.manage('GET', '/v1/status')).json);
  });
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
      refused(1, 'Unknown model "llama3": use one of gemma4:26b, qwen3.6:27b (the operator can set OB_PROXY_MODELS).'),
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

describe('confirmation on a terminal', () => {
  it('a "no" changes nothing (exit 1), a "yes" or --yes goes ahead; the question names what dies', async () => {
    const questions: string[] = [];
    let reply = 'n';
    const c = inprocCli(d.daemon.management, {
      ask: (q) => {
        questions.push(q);
        return Promise.resolve(reply);
      },
    });
    expect(await c.run('instances', 'stop', 'j1')).toEqual(
      refused(1, 'Not confirmed: nothing was changed (pass --yes to skip the question).'),
    );
    expect(((await d.manage('GET', '/v1/instances/j1')).json as { state: string }).state).toBe('ready');
    reply = 'y';
    expect(await c.run('instances', 'stop', 'j1')).toEqual(
      ok('Instance j1 is now stopped. All its keys are revoked.\n'),
    );
    expect(questions).toEqual([
      'Stop instance j1 (gemma4:26b) and revoke its 2 active keys for ever? [y/N] ',
      'Stop instance j1 (gemma4:26b) and revoke its 2 active keys for ever? [y/N] ',
    ]);
    expect(await c.run('instances', 'remove', 'j1', '--yes')).toEqual(
      ok('Removed instance j1. All its keys are revoked; they answer 404 deployment_not_found.\n'),
    );
    expect(questions).toHaveLength(2);
  });
});

describe('confirmation names what dies', () => {
  it('fail, terminate and remove ask too, and an empty answer is no; keys revoke names the key by name and hint', async () => {
    await cli.json('instances', 'add', 'conf', '--model', MODEL, '--endpoint', simUrl);
    await cli.json('instances', 'ready', 'conf');
    const questions: string[] = [];
    const c = inprocCli(d.daemon.management, {
      ask: (q) => {
        questions.push(q);
        return Promise.resolve('');
      },
    });
    for (const action of ['fail', 'terminate', 'remove']) {
      expect(await c.run('instances', action, 'conf'), action).toEqual(
        refused(1, 'Not confirmed: nothing was changed (pass --yes to skip the question).'),
      );
    }
    expect(questions).toEqual([
      'Mark instance conf (gemma4:26b) failed and revoke its 1 active key for ever? [y/N] ',
      'Terminate instance conf (gemma4:26b) for good and revoke its 1 active key for ever? [y/N] ',
      'Remove instance conf (gemma4:26b): revoke its 1 active key for ever (they answer 404) and forget the record? [y/N] ',
    ]);
    expect(await cli.json('instances', 'show', 'conf')).toMatchObject({ state: 'ready', activeKeys: 1 });

    const key = await cli.json<{ id: string; hint: string; secret: string }>(
      'keys',
      'create',
      '--instance',
      'conf',
      '--name',
      'key-0',
    );
    const yes = inprocCli(d.daemon.management, {
      ask: (q) => {
        questions.push(q);
        return Promise.resolve('yes');
      },
    });
    const revoked = await yes.run('keys', 'revoke', key.id);
    expect(revoked).toEqual(ok(`Revoked key ${key.id} ("key-0") of instance conf. It answers 401 from now on.\n`));
    expect(questions.at(-1)).toBe(`Revoke key "key-0" (${key.hint}) of instance conf for ever? [y/N] `);
    expect(questions.join('')).not.toContain(key.secret);
    // Nothing to ask about a key already revoked: the daemon's refusal says why.
    expect(await yes.run('keys', 'revoke', key.id)).toEqual(
      refused(1, `Key ${key.id} was already revoked at ${AT} (manual).`),
    );
    expect(questions).toHaveLength(4);
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

describe('ob-proxy usage selects', () => {
  it('--key, --instance and --since select keys; totals add up what is shown; refusals', async () => {
    await cli.json('instances', 'add', 'use-a', '--model', MODEL, '--endpoint', simUrl);
    const first = (await cli.json<{ defaultKey: { id: string; secret: string } }>('instances', 'ready', 'use-a'))
      .defaultKey;
    const bot = await cli.json<{ id: string; secret: string }>(
      'keys',
      'create',
      '--instance',
      'use-a',
      '--name',
      'bot',
    );
    const idle = await cli.json<{ id: string }>('keys', 'create', '--instance', 'use-a', '--name', 'idle');
    for (const secret of [first.secret, first.secret, bot.secret]) {
      expect((await d.chat(secret, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] })).status).toBe(200);
    }
    const used = (requests: number): Record<string, unknown> => ({
      requests,
      promptTokens: requests,
      completionTokens: 8 * requests,
      reasoningTokens: 0,
      estimatedTokens: 0,
      errors: 0,
      disconnects: 0,
      firstUsedAt: AT,
      lastUsedAt: AT,
      byRoute: { chat: { requests, promptTokens: requests, completionTokens: 8 * requests } },
    });
    const unused = {
      requests: 0,
      promptTokens: 0,
      completionTokens: 0,
      reasoningTokens: 0,
      estimatedTokens: 0,
      errors: 0,
      disconnects: 0,
      firstUsedAt: null,
      lastUsedAt: null,
      byRoute: {},
    };
    const pack = {
      instance: 'use-a',
      deployment: d.daemon.ctx.lifecycle.registry.instances.get('use-a')!.deployment,
      model: MODEL,
      state: 'ready',
      packEndsAt: null,
    };
    const rows = {
      first: { id: first.id, name: 'default', status: 'active', ...used(2) },
      bot: { id: bot.id, name: 'bot', status: 'active', ...used(1) },
      idle: { id: idle.id, name: 'idle', status: 'active', ...unused },
    };
    expect(await cli.json('usage', '--instance', 'use-a')).toEqual({
      since: null,
      packs: [{ ...pack, keys: [rows.first, rows.bot, rows.idle], total: used(3) }],
    });
    expect(await cli.json('usage', '--key', bot.id)).toEqual({
      since: null,
      packs: [{ ...pack, keys: [rows.bot], total: used(1) }],
    });
    // --since: keys used at or after the time; the unused key drops out, counters stay whole.
    const since = await cli.json<{ since: string; packs: { instance: string; keys: unknown[] }[] }>(
      'usage',
      '--since',
      '2026-11-23T11:00:00Z',
    );
    expect(since.since).toBe('2026-11-23T11:00:00.000Z');
    expect(since.packs.find((p) => p.instance === 'use-a')!.keys).toEqual([rows.first, rows.bot]);
    expect(await cli.json('usage', '--since', '2099-01-01T00:00:00Z')).toEqual({
      since: '2099-01-01T00:00:00.000Z',
      packs: [],
    });
    expect(await cli.run('usage', '--since', '2099-01-01T00:00:00Z')).toEqual(
      ok('No key was used since 2099-01-01T00:00:00.000Z.\n'),
    );
    expect(await cli.run('usage', '--since', 'yesterday')).toEqual(
      refused(
        2,
        '--since must be an ISO 8601 time with a zone (2026-11-01T00:00:00Z) or a duration back from now (24h, 7d), got "yesterday".',
      ),
    );
    expect(await cli.run('usage', '--key', 'nope')).toEqual(
      refused(1, 'No key with id nope. List keys with `ob-proxy keys list`.'),
    );
  });
});
