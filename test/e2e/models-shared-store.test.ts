/**
 * A third model on a shared PostgreSQL store, end to end: two real `ob-proxy serve` on one
 * database, a real `ob-proxy simulate` serving `llama3.1:8b`, and the real CLI. `models allow`
 * through one daemon, while both run, lets the other make an instance of the model; its key
 * then answers through both daemons, and the simulator saw the model's requests only.
 */
import { describe, expect, it } from 'vitest';
import { usePostgresRig } from '../helpers/postgres-rig.js';
import { cliJson, eventually, runCli } from '../helpers/processes.js';

const THIRD = 'llama3.1:8b';

async function chat(base: string, secret: string, content: string): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
    body: JSON.stringify({ model: THIRD, messages: [{ role: 'user', content }] }),
  });
  return { status: res.status, body: (await res.json()) as unknown };
}

describe('a third model on two daemons of one PostgreSQL store', () => {
  const rig = usePostgresRig({ models: [THIRD], simArgs: [] });

  it('allowed through one daemon while both run, made an instance through the other, served by both', async () => {
    const { a: nodeA, b: nodeB } = await rig.pair({}, ['--grace', '1']);
    const [a, b] = [nodeA.serve, nodeB.serve];
    const [homeA, homeB] = [a.home, b.home];
    const sim = rig.sim;

    const before = await runCli(['instances', 'add', 'llama-1', '--model', THIRD, '--endpoint', sim.url], {
      home: homeB,
    });
    expect([before.code, before.stderr]).toEqual([
      1,
      `error: Model "${THIRD}" is not allowed: the allowed models are gemma4:26b, qwen3.6:27b. Allow it first with \`ob-proxy models allow ${THIRD}\`.\n`,
    ]);
    expect(await cliJson(['models', 'allow', THIRD], homeA)).toMatchObject({
      models: [{ id: 'gemma4:26b' }, { id: 'qwen3.6:27b' }, { id: THIRD }],
      source: 'store',
    });
    // b hears the list through the store's change log, and allows the model too.
    await eventually(async () => {
      const s = await cliJson<{ models: string[] }>(['status'], homeB);
      return s.models.includes(THIRD);
    }, 'the allowed list on b');
    await cliJson(['instances', 'add', 'llama-1', '--model', THIRD, '--endpoint', sim.url], homeB);
    const ready = await cliJson<{ state: string; model: string; defaultKey: { secret: string } }>(
      ['instances', 'ready', 'llama-1'],
      homeB,
    );
    expect([ready.state, ready.model]).toEqual(['ready', THIRD]);
    const secret = ready.defaultKey.secret;

    const viaB = await chat(b.baseUrl, secret, 'through b');
    expect(viaB.status).toBe(200);
    expect(viaB.body).toMatchObject({ object: 'chat.completion', model: THIRD });
    // a knows the instance and its key through the store.
    const viaA = await eventually(async () => {
      const r = await chat(a.baseUrl, secret, 'through a');
      return r.status === 200 ? r : undefined;
    }, 'the key on a');
    expect(viaA.body).toMatchObject({ object: 'chat.completion', model: THIRD });
    const chats = (await sim.requests()).filter((r) => r.path === '/v1/chat/completions');
    expect(chats.map((r) => [(r.body as { model: string }).model, JSON.stringify(r.body).includes('through')])).toEqual(
      chats.map(() => [THIRD, true]),
    );
    expect(chats.map((r) => (r.body as { messages: { content: string }[] }).messages[0]!.content)).toEqual([
      'through b',
      'through a',
    ]);
  }, 90_000);
});
