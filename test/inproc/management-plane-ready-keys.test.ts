/**
 * The management plane through `inject()`, the first part of one instance's life: status, add,
 * ready (refused, then probed and giving the default key's secret once), keys created, limited
 * and listed without a secret, the pack's usage receipt, live stats, and a key revoked. Whole
 * bodies, refusals in our error shape. The steps run in order, so each test starts from the
 * state the one before it left. Over the real socket, through the real CLI, the same routes run
 * once in test/e2e/lifecycle-cli.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { BOT_SECRET, DEFAULT_SECRET } from '../helpers/counted-secrets.js';
import { type Inproc, MODEL, T0, buildInproc, startSim } from '../helpers/inproc.js';
import { REACHABLE, instanceView } from '../helpers/instance-view.js';
import { manageStatusJson, refusal } from '../helpers/status-and-json.js';

let d: Inproc;
let sim: Simulator;
let simUrl: string;
const AT = new Date(T0).toISOString();

beforeAll(async () => {
  d = await buildInproc();
  ({ sim, url: simUrl } = await startSim());
});

afterAll(async () => {
  await d?.close();
  await sim?.close();
});

const call = (method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown) => manageStatusJson(d, method, url, body);
const instance = (over: Record<string, unknown> = {}) => instanceView(simUrl, over);

const NO_USAGE = {
  requests: 0,
  promptTokens: 0,
  completionTokens: 0,
  reasoningTokens: 0,
  estimatedTokens: 0,
  errors: 0,
  disconnects: 0,
  firstUsedAt: null,
  byRoute: {},
};
function key(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    id: 'k00000000001',
    name: 'default',
    instance: 'gpu-1',
    status: 'active',
    hint: 'ob_sk_…dnTO',
    isDefault: true,
    createdAt: AT,
    lastUsedAt: null,
    revokedAt: null,
    revokeReason: null,
    usage: NO_USAGE,
    limits: { rpm: null, tpm: null, concurrency: null },
    revealable: false,
    ...over,
  };
}
const BOT = { id: 'k00000000002', name: 'ci-bot', hint: 'ob_sk_…3TlC', isDefault: false };

describe("an instance's life, route by route", () => {
  it('status says what the daemon is, before it listens (no base URL yet)', async () => {
    expect(await call('GET', '/v1/status')).toEqual({
      status: 200,
      json: {
        version: 'test',
        pid: process.pid,
        baseUrl: '',
        store: 'memory',
        socket: d.config.socket,
        startedAt: AT,
        models: [MODEL, 'qwen3.6:27b'],
        storeSync: null,
        daemons: { shared: false, newestRevocation: null, daemons: [] },
      },
    });
  });

  it('add: pending, no endpoint; refusals name the field', async () => {
    expect(await call('POST', '/v1/instances', { id: 'gpu-1', model: MODEL })).toEqual({
      status: 201,
      json: instance({ endpoint: null, state: 'pending', activeKeys: 0 }),
    });
    expect(await call('POST', '/v1/instances', { id: 'gpu-1', model: MODEL })).toEqual(
      refusal(
        409,
        'conflict_error',
        'instance_exists',
        'Instance "gpu-1" already exists; pick another id or remove it first.',
      ),
    );
    expect(await call('POST', '/v1/instances', { id: 'gpu-2', model: 'nope' })).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'unknown_model',
        'Model "nope" is not allowed: the allowed models are gemma4:26b, qwen3.6:27b. Allow it first with `ob-proxy models allow nope`.',
        'model',
      ),
    );
    expect(await call('POST', '/v1/instances', { id: 'bad id!', model: MODEL })).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_argument',
        'Instance id must be 1-64 characters: letters, digits, and . _ : - (not first).',
        'id',
      ),
    );
  });

  it('ready: refused without an endpoint, or where no model server answers; no key is made then', async () => {
    expect(await call('POST', '/v1/instances/gpu-1/ready', {})).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_argument',
        'Instance "gpu-1" has no endpoint: give --endpoint URL (the model server\'s base URL).',
        'endpoint',
      ),
    );
    expect(await call('POST', '/v1/instances/gpu-1/ready', { endpoint: 'http://127.0.0.1:1' })).toEqual(
      refusal(
        502,
        'api_error',
        'endpoint_unreachable',
        'Instance gpu-1 was not made ready: GET http://127.0.0.1:1/v1/models: connection refused (is the model server running on that port?). Check the endpoint and that the model server is up, or skip this check with --no-probe.',
      ),
    );
    expect(await call('POST', '/v1/keys', { instance: 'gpu-1', name: 'x' })).toEqual(
      refusal(
        409,
        'conflict_error',
        'instance_not_ready',
        'Instance "gpu-1" is pending; keys can be created only for a ready instance.',
      ),
    );
    expect(await call('GET', '/v1/keys')).toEqual({ status: 200, json: [] });
  });

  it("ready: probed, then the default key's secret, once; a second ready is an invalid transition", async () => {
    expect(await call('POST', '/v1/instances/gpu-1/ready', { endpoint: simUrl })).toEqual({
      status: 200,
      json: {
        ...instance({ health: REACHABLE }),
        defaultKey: { id: 'k00000000001', name: 'default', secret: DEFAULT_SECRET },
      },
    });
    expect(await call('POST', '/v1/instances/gpu-1/ready', {})).toEqual(
      refusal(
        409,
        'conflict_error',
        'invalid_transition',
        'Instance gpu-1 is ready; "ready" works only from pending, stopped, failed.',
      ),
    );
    expect(await call('POST', '/v1/keys/k00000000001/reveal', {})).toEqual(
      refusal(
        409,
        'conflict_error',
        'reveal_refused',
        'The secret of key k00000000001 cannot be shown: it was already displayed, or the daemon restarted since it was made. Create a new key with `ob-proxy keys create`.',
      ),
    );
  });

  it('keys create (with limits), limit, list: never a secret in a listing', async () => {
    expect(await call('POST', '/v1/keys', { instance: 'gpu-1', name: 'ci-bot', limits: { rpm: 60 } })).toEqual({
      status: 201,
      json: {
        ...key({ ...BOT, limits: { rpm: 60, tpm: null, concurrency: null } }),
        secret: BOT_SECRET,
      },
    });
    expect(await call('POST', '/v1/keys', { instance: 'gpu-1', name: '' })).toEqual(
      refusal(400, 'invalid_request_error', 'invalid_argument', 'Key name must not be empty.', 'name'),
    );
    // null removes a limit, an absent field keeps it.
    expect(await call('POST', '/v1/keys/k00000000002/limits', { rpm: null, concurrency: 2 })).toEqual({
      status: 200,
      json: key({ ...BOT, limits: { rpm: null, tpm: null, concurrency: 2 } }),
    });
    expect(await call('POST', '/v1/keys/k00000000002/limits', { rpm: -1 })).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_argument',
        '--rpm must be a whole number from 1 to 1000000000, or none.',
        'rpm',
      ),
    );
    const listed = await d.manage('GET', '/v1/keys?instance=gpu-1');
    expect(listed.json).toEqual([key(), key({ ...BOT, limits: { rpm: null, tpm: null, concurrency: 2 } })]);
    expect(listed.text).not.toContain('r0000000000');
    expect(await call('GET', '/v1/keys?instance=other')).toEqual({ status: 200, json: [] });
  });

  it('usage: the receipt of the pack, from the counters in memory', async () => {
    expect((await d.chat(BOT_SECRET, { model: MODEL, messages: [{ role: 'user', content: 'hi' }] })).status).toBe(200);
    const counted = {
      requests: 1,
      promptTokens: 1,
      completionTokens: 8,
      reasoningTokens: 0,
      estimatedTokens: 0,
      errors: 0,
      disconnects: 0,
      firstUsedAt: AT,
      lastUsedAt: AT,
      byRoute: { chat: { requests: 1, promptTokens: 1, completionTokens: 8 } },
    };
    const idle = {
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
    expect(await call('GET', '/v1/usage?instance=gpu-1')).toEqual({
      status: 200,
      json: {
        since: null,
        packs: [
          {
            instance: 'gpu-1',
            deployment: expect.any(String),
            model: MODEL,
            state: 'ready',
            packEndsAt: null,
            keys: [
              { id: 'k00000000001', name: 'default', status: 'active', ...idle },
              { id: 'k00000000002', name: 'ci-bot', status: 'active', ...counted },
            ],
            total: counted,
          },
        ],
      },
    });
    expect(await call('GET', '/v1/usage?key=nope')).toEqual(
      refusal(404, 'not_found_error', 'key_not_found', 'No key with id nope. List keys with `ob-proxy keys list`.'),
    );
    expect(await call('GET', '/v1/usage?since=yesterday')).toEqual(
      refusal(
        400,
        'invalid_request_error',
        'invalid_argument',
        'since must be an ISO 8601 time with a zone, e.g. 2026-12-01T18:00:00Z.',
        'since',
      ),
    );
  });

  it("stats: no samples until one is taken (the sampler is a listen() timer), then the instance's figures", async () => {
    expect(await call('GET', '/v1/stats')).toEqual({
      status: 200,
      json: {
        at: AT,
        instances: [
          {
            instance: 'gpu-1',
            requestsPerSecond: 0,
            tokensPerSecond: 0,
            errorsPerSecond: 0,
            openStreams: 0,
            requests: [],
            tokens: [],
            errors: [],
            streams: [],
            sampleMs: [],
          },
        ],
      },
    });
    d.clock.advance(1000);
    try {
      d.daemon.ctx.live.sample(d.clock.now(), () => true);
      const stats = (await call('GET', '/v1/stats')).json as {
        at: string;
        instances: { instance: string; requests: number[]; tokens: number[] }[];
      };
      expect(stats.at).toBe(new Date(T0 + 1000).toISOString());
      expect(stats.instances.map((i) => [i.instance, i.requests.at(-1), i.tokens.at(-1)])).toEqual([['gpu-1', 1, 8]]);
    } finally {
      d.clock.ms = T0;
    }
  });

  it('revoke one key; a second revoke or an unknown id is refused', async () => {
    const revoked = await call('POST', '/v1/keys/k00000000002/revoke', {});
    expect(revoked).toEqual({
      status: 200,
      json: key({
        ...BOT,
        status: 'revoked',
        revokedAt: AT,
        revokeReason: 'manual',
        limits: { rpm: null, tpm: null, concurrency: 2 },
        lastUsedAt: AT,
        usage: {
          requests: 1,
          promptTokens: 1,
          completionTokens: 8,
          reasoningTokens: 0,
          estimatedTokens: 0,
          errors: 0,
          disconnects: 0,
          firstUsedAt: AT,
          byRoute: { chat: { requests: 1, promptTokens: 1, completionTokens: 8 } },
        },
      }),
    });
    expect(await call('POST', '/v1/keys/nope/revoke', {})).toEqual(
      refusal(404, 'not_found_error', 'key_not_found', 'No key "nope". List keys with `ob-proxy keys list`.'),
    );
  });
});
