/**
 * The CLI in process: `runCli` with a DaemonClient that reaches a never-listening daemon through
 * `inject()` (test/helpers/inproc-cli.ts). The whole outputs of the main commands through one
 * instance's life, as a person reads them and as --json prints the daemon's views. The real
 * binary over the real socket runs once in test/e2e/lifecycle-cli.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { ok, refused } from '../helpers/cli-outcome.js';
import { BOT_SECRET, DEFAULT_SECRET } from '../helpers/counted-secrets.js';
import { type Inproc, MODEL, T0, buildInproc, startSim } from '../helpers/inproc.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';

const AT = new Date(T0).toISOString();
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
          'ID     MODEL       ALIASES  STATE    HEALTH     KEYS  ENDPOINT                PACK ENDS',
          `gpu-1  gemma4:26b  -        ready    reachable  1     ${simUrl}  -`,
          'x1     gemma4:26b  -        pending  -          0     -                       -',
          '',
        ].join('\n'),
      ),
    );
    expect(await cli.run('instances', 'show', 'gpu-1')).toEqual(
      ok(
        [
          'id           gpu-1',
          'model        gemma4:26b',
          'aliases      -',
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
      aliases: [],
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
