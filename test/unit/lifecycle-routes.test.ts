/**
 * The management routes' JSON Schemas: Fastify refuses a body, path or query of the wrong shape
 * before any handler runs, in our error envelope (400 invalid_argument, the field as `param`, the
 * sentence the core gives for that field), and nothing changes. A real daemon on its socket.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DaemonClient } from '../../cli/daemon-client.js';
import { type Harness, MODEL, startHarness } from '../reliability/harness.js';

let h: Harness;
let client: DaemonClient;
let keyId: string;
beforeAll(async () => {
  h = await startHarness();
  client = new DaemonClient(h.config.socket);
  await client.addInstance({ id: 'gpu-1', model: MODEL, endpoint: 'http://127.0.0.1:9' });
  keyId = (await client.ready('gpu-1', { wait: true, probe: false })).defaultKey!.id;
});
afterAll(() => h.stop());

/** One request on the socket, as any client could send it: status and parsed body. */
function send(method: string, path: string, body?: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      {
        socketPath: h.config.socket,
        method,
        path,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as unknown }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function refusal(param: string | null, message: string) {
  return { status: 400, body: { error: { message, type: 'invalid_request_error', code: 'invalid_argument', param } } };
}

const ID = 'Instance id must be 1-64 characters: letters, digits, and . _ : - (not first).';
const DATE = 'packEndsAt must be an ISO 8601 time with a zone, e.g. 2026-12-01T18:00:00Z.';
const TOKEN = "--upstream-token-file must be an absolute path to a file holding the model server's token.";

describe('management schemas', () => {
  it('bodies of the wrong shape are refused naming the field, and nothing is added or changed', async () => {
    const before = JSON.stringify(await client.listInstances());
    const cases: [string, string, string, ReturnType<typeof refusal>][] = [
      ['POST', '/v1/instances', JSON.stringify({ id: 42, model: MODEL }), refusal('id', ID)],
      ['POST', '/v1/instances', JSON.stringify({ model: MODEL }), refusal('id', ID)],
      [
        'POST',
        '/v1/instances',
        JSON.stringify({ id: 'gpu-2', model: ['a'] }),
        refusal('model', 'model must be the id of an allowed model (`ob-proxy models list` lists them).'),
      ],
      [
        'POST',
        '/v1/instances',
        JSON.stringify({ id: 'gpu-2', model: MODEL, upstreamTokenFile: 'relative/token' }),
        refusal('upstreamTokenFile', TOKEN),
      ],
      [
        'POST',
        '/v1/instances',
        JSON.stringify({ id: 'gpu-2', model: MODEL, packEnds: '2030-01-01T00:00:00Z' }),
        refusal(
          'packEnds',
          'The request body has a field "packEnds" this daemon does not take. Is the CLI newer than the daemon?',
        ),
      ],
      ['POST', '/v1/instances', '[1,2]', refusal(null, 'The request body must be a JSON object.')],
      [
        'POST',
        '/v1/instances/gpu-1/ready',
        JSON.stringify({ wait: 'no' }),
        refusal('wait', 'wait must be true or false.'),
      ],
      ['POST', '/v1/instances/gpu-1/extend', JSON.stringify({}), refusal('packEndsAt', DATE)],
      [
        'POST',
        '/v1/instances/gpu-1/aliases',
        JSON.stringify({ add: 'claude-sonnet-4-5' }),
        refusal('add', 'add must be a list of model ids.'),
      ],
      [
        'POST',
        '/v1/instances/gpu-1/aliases',
        JSON.stringify({ add: ['claude-sonnet-4-5', 7] }),
        refusal('add', 'add must be a list of model ids.'),
      ],
      [
        'POST',
        '/v1/instances/gpu-1/aliases',
        JSON.stringify({ remove: [null] }),
        refusal('remove', 'remove must be a list of model ids.'),
      ],
      [
        'POST',
        '/v1/instances/gpu-1/aliases',
        JSON.stringify({ clear: 'yes' }),
        refusal('clear', 'clear must be true or false.'),
      ],
      [
        'POST',
        '/v1/instances/gpu-1/aliases',
        JSON.stringify({ aliases: ['x'] }),
        refusal(
          'aliases',
          'The request body has a field "aliases" this daemon does not take. Is the CLI newer than the daemon?',
        ),
      ],
      ['POST', '/v1/instances/gpu-1/extend', JSON.stringify({ packEndsAt: 1893456000 }), refusal('packEndsAt', DATE)],
      [
        'POST',
        '/v1/instances/gpu-1/stop',
        JSON.stringify({ force: true }),
        refusal(
          'force',
          'The request body has a field "force" this daemon does not take. Is the CLI newer than the daemon?',
        ),
      ],
      [
        'POST',
        '/v1/keys',
        JSON.stringify({ instance: 'gpu-1', name: 7 }),
        refusal('name', 'Key name is required: give --name.'),
      ],
      [
        'POST',
        '/v1/keys',
        JSON.stringify({ instance: 'gpu-1', name: 'ci', limits: { rpm: 0 } }),
        refusal('rpm', '--rpm must be a whole number from 1 to 1000000000, or none.'),
      ],
      [
        'POST',
        `/v1/keys/${keyId}/limits`,
        JSON.stringify({ tpm: 1.5 }),
        refusal('tpm', '--tpm must be a whole number from 1 to 1000000000, or none.'),
      ],
      [
        'POST',
        `/v1/keys/${keyId}/limits`,
        JSON.stringify({ concurrency: '2' }),
        refusal('concurrency', '--concurrency must be a whole number from 1 to 1000000000, or none.'),
      ],
    ];
    for (const [method, path, body, expected] of cases) {
      expect({ path, sent: body, ...(await send(method, path, body)) }).toEqual({ path, sent: body, ...expected });
    }
    expect(JSON.stringify(await client.listInstances())).toBe(before);
    expect((await client.listKeys('gpu-1')).map((k) => [k.name, k.limits])).toEqual([
      ['default', { rpm: null, tpm: null, concurrency: null }],
    ]);
  });

  it('queries of the wrong shape are refused too', async () => {
    expect(await send('GET', '/v1/instances?state=bogus')).toEqual(
      refusal('state', '--state must be one of pending, ready, stopped, failed, terminated.'),
    );
    expect(await send('GET', '/v1/instances?state=ready&state=pending')).toEqual(
      refusal('state', '--state must be one of pending, ready, stopped, failed, terminated.'),
    );
    expect(await send('GET', '/v1/keys?owner=me')).toEqual(
      refusal(
        'owner',
        'The query string has a field "owner" this daemon does not take. Is the CLI newer than the daemon?',
      ),
    );
    expect(await send('GET', '/v1/usage?since=1&since=2')).toEqual(
      refusal('since', 'since must be an ISO 8601 time with a zone, e.g. 2026-12-01T18:00:00Z.'),
    );
  });

  it('what the shape allows goes on to the core, which judges the content with its own sentence', async () => {
    expect(await send('POST', '/v1/instances', JSON.stringify({ id: '../x', model: MODEL }))).toEqual(
      refusal('id', ID),
    );
    expect(await send('POST', '/v1/instances/gpu-1/extend', JSON.stringify({ packEndsAt: 'tomorrow' }))).toEqual(
      refusal('packEndsAt', DATE),
    );
    expect(await send('POST', '/v1/instances/gpu-1/aliases', JSON.stringify({ add: ['two words'] }))).toEqual(
      refusal(
        'aliases',
        'Alias "two words" is not a model id: 1-200 characters: letters, digits, and . _ : / @ + - (not first). Give the id the agent sends as model, e.g. claude-sonnet-4-5.',
      ),
    );
    const unknown = await send('POST', '/v1/instances', JSON.stringify({ id: 'gpu-3', model: 'llama' }));
    expect(unknown).toMatchObject({ status: 400, body: { error: { code: 'unknown_model', param: 'model' } } });
  });

  it('well-formed requests pass, with or without the optional body', async () => {
    expect(await send('GET', '/v1/instances?state=ready')).toMatchObject({
      status: 200,
      body: [{ id: 'gpu-1', state: 'ready' }],
    });
    expect(await send('POST', `/v1/keys/${keyId}/limits`, JSON.stringify({ rpm: 60, tpm: null }))).toMatchObject({
      status: 200,
      body: { id: keyId, limits: { rpm: 60, tpm: null, concurrency: null } },
    });
    const aliased = await send('POST', '/v1/instances/gpu-1/aliases', JSON.stringify({ add: ['claude-sonnet-4-5'] }));
    expect(aliased).toEqual({ status: 200, body: await client.getInstance('gpu-1') });
    expect(aliased.body).toMatchObject({ aliases: ['claude-sonnet-4-5'] });
    expect(await client.alias('gpu-1', { clear: true })).toMatchObject({ id: 'gpu-1', aliases: [] });
    expect(await send('POST', '/v1/instances/gpu-1/pending')).toMatchObject({
      status: 200,
      body: { id: 'gpu-1', state: 'pending' },
    });
    expect(await send('POST', '/v1/instances/gpu-1/ready', JSON.stringify({ wait: true, probe: false }))).toMatchObject(
      { status: 200, body: { id: 'gpu-1', state: 'ready', defaultKey: null } },
    );
    expect(await send('DELETE', '/v1/instances/gpu-1')).toMatchObject({
      status: 200,
      body: { id: 'gpu-1', removed: true },
    });
  });
});
