/**
 * The console's live view: per instance, requests, tokens and errors per second
 * and open streams with sparklines, from the daemon's stats route polled while connected; the
 * health of each instance's model server; per key, its usage and (when the daemon has them) its
 * limits. Against the FakeDaemon; the real daemon's stats route is tested in
 * test/e2e/live-stats.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { InstanceLiveView } from '../../src/services/live-stats.js';
import { eventually } from '../helpers/processes.js';
import { FakeDaemon } from './fake-daemon.js';
import { renderConsole, trimmed, twoInstances } from './render-console.js';

function figures(instance: string, extra: Partial<InstanceLiveView> = {}): InstanceLiveView {
  return {
    instance, requestsPerSecond: 4, tokensPerSecond: 120, errorsPerSecond: 0, openStreams: 2,
    requests: [0, 1, 2, 4], tokens: [0, 30, 60, 120], errors: [0, 0, 0, 0], streams: [0, 1, 1, 2], sampleMs: [1000, 1000, 1000, 1000],
    ...extra,
  };
}

describe('console: live view', () => {
  it('shows the selected instance\'s rates, open streams and errors with sparklines, and its model server\'s health', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.instances[0]!.health = { status: 'reachable', checkedAt: '2026-11-23T11:59:58.000Z', error: null };
    fake.live = { at: '2026-11-23T12:00:00.000Z', instances: [figures('gpu-1')] };
    const ui = renderConsole(fake);
    expect(trimmed(await ui.waitForFrame('requests/s'))).toMatchInlineSnapshot(`
      "ob-proxy console · http://127.0.0.1:8080 · ● live                         ? help
      [1 Instances (2)] 2 Keys: gpu-1 (1)  3 Revocations
        ID     MODEL        STATE      HEALTH        ENDPOINT  PACK END (UTC)     KEYS
      › gpu-1  gemma4:26b   ready      reachable     http://1… 11-23 15:12 3h 12m    1
        gpu-2  qwen3.6:27b  pending    -             -         -                     0

        gpu-1 · gemma4:26b · http://10.0.0.5:11434
        Ready: Enter shows its keys, n generates a new one.
        Model server: reachable (probed 11-23 11:59:58 UTC)
        requests/s        4 ▁▃▅█
        tokens/s        120 ▁▃▅█
        open streams      2 ▁▅▅█
        errors/s          0 ▁▁▁▁









      ↑↓ move  Enter keys  s stop  f fail  e extend  n new key  ? help  q quit"
    `);
  });

  it('follows the daemon\'s figures as they change, and the selection to another instance', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.live = { at: '2026-11-23T12:00:00.000Z', instances: [figures('gpu-1'), figures('gpu-2', { requestsPerSecond: 0, tokensPerSecond: 0, openStreams: 0, requests: [0, 0], tokens: [0, 0], streams: [0, 0], errors: [0, 0], sampleMs: [1000, 1000] })] };
    const ui = renderConsole(fake);
    await ui.waitForFrame(/requests\/s\s+4 ▁▃▅█/);
    fake.live = { at: '2026-11-23T12:00:01.000Z', instances: [figures('gpu-1', { requestsPerSecond: 8, errorsPerSecond: 2, requests: [0, 1, 2, 4, 8], errors: [0, 0, 0, 0, 2], tokens: [0, 30, 60, 120, 240], streams: [0, 1, 1, 2, 3], sampleMs: [1000, 1000, 1000, 1000, 1000], openStreams: 3 })] };
    const frame = await ui.waitForFrame(/requests\/s\s+8 ▁▂▃▅█/);
    expect(frame).toMatch(/errors\/s\s+2 ▁▁▁▁█/);
    expect(frame).toMatch(/open streams\s+3 ▁▃▃▆█/);
    await ui.press('j');
    const other = await ui.waitForFrame('› gpu-2');
    expect(other).not.toContain('requests/s');
  });

  it('shows no live figures when the daemon has none to give (an older daemon)', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.live = null;
    const ui = renderConsole(fake);
    const frame = await ui.waitForFrame('Ready: Enter shows its keys');
    await eventually(() => fake.calls.filter((c) => c[0] === 'stats').length >= 2, 'two polls');
    expect(ui.lastFrame()).toBe(frame);
    expect(frame).not.toContain('requests/s');
  });

  it('says when a ready instance\'s model server is down or lacks the model, and why', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.instances[0]!.health = { status: 'unreachable', checkedAt: '2026-11-23T11:59:58.000Z', error: 'GET http://10.0.0.5:11434/v1/models: connection refused' };
    fake.addInstance('gpu-3', 'qwen3.6:27b', 'ready', { health: { status: 'model missing', checkedAt: '2026-11-23T11:59:59.000Z', error: 'GET http://10.0.0.6:11434/v1/models: model qwen3.6:27b is not served' } });
    const ui = renderConsole(fake);
    const frame = await ui.waitForFrame('gpu-3');
    expect(frame).toMatch(/› gpu-1\s+gemma4:26b\s+ready\s+unreachable\s/);
    expect(frame).toMatch(/ {2}gpu-2\s+qwen3.6:27b\s+pending\s+-\s/);
    expect(frame).toMatch(/ {2}gpu-3\s+qwen3.6:27b\s+ready\s+model missing\s/);
    expect(frame).toContain('  Model server: unreachable (probed 11-23 11:59:58 UTC)\n  GET http://10.0.0.5:11434/v1/models: connection refused\n');
  });
});

describe('console: key usage and limits', () => {
  it('shows the selected key\'s usage, and its limits when the daemon sends them', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.addKey('gpu-1', 'ci-bot', {
      createdAt: '2026-11-23T11:00:00.000Z', lastUsedAt: '2026-11-23T11:59:00.000Z',
      usage: { requests: 12, promptTokens: 420, completionTokens: 31_337, reasoningTokens: 900, errors: 1, disconnects: 2, estimatedTokens: 350, firstUsedAt: '2026-11-23T11:01:02.000Z', byRoute: {} },
      ...({ limits: { rpm: 60, tpm: null, concurrency: 4 } } as object),
    });
    const ui = renderConsole(fake);
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    await ui.waitForFrame('Keys of gpu-1');
    const first = await ui.waitForFrame('› default');
    expect(first).toContain('  0 requests · 0 in / 0 out · 0 reasoning · 0 errors · 0 left early\n');
    expect(first).toContain('  Limits: none\n');
    expect(first).not.toContain('estimates');
    await ui.press('j');
    const frame = await ui.waitForFrame('› ci-bot');
    expect(frame).toContain('  12 requests · 420 in / 31k out · 900 reasoning · 1 error · 2 left early\n');
    expect(frame).toContain('  Of those tokens 350 are estimates: the model server never reported them.\n');
    expect(frame).toContain('  Limits: 60 requests/min · no token limit · 4 at once\n');
  });

  it('splits the selected key\'s usage by route, a line per route used, and the table leaves them room', async () => {
    const fake = new FakeDaemon();
    twoInstances(fake);
    fake.addKey('gpu-1', 'codex', {
      createdAt: '2026-11-23T11:00:00.000Z', lastUsedAt: '2026-11-23T11:59:00.000Z',
      usage: {
        requests: 13, promptTokens: 1_420, completionTokens: 31_338, reasoningTokens: 0, errors: 0, disconnects: 0, estimatedTokens: 0,
        firstUsedAt: '2026-11-23T11:01:02.000Z',
        byRoute: {
          responses: { requests: 12, promptTokens: 1_400, completionTokens: 31_337 },
          messages: { requests: 1, promptTokens: 20, completionTokens: 1 },
        },
      },
    });
    // As an older daemon sends it: no split, and no line for one.
    const old = fake.addKey('gpu-1', 'old', { createdAt: '2026-11-23T11:30:00.000Z' });
    delete (old.usage as Partial<typeof old.usage>).byRoute;
    const ui = renderConsole(fake, { rows: 16 });
    await ui.waitForFrame('› gpu-1');
    await ui.press('enter');
    await ui.waitForFrame('Keys of gpu-1');
    await ui.press('j');
    const frame = await ui.waitForFrame('› codex');
    expect(trimmed(frame)).toMatchInlineSnapshot(`
      "ob-proxy console · http://127.0.0.1:8080 · ● live                         ? help
       1 Instances (2) [2 Keys: gpu-1 (3)] 3 Revocations
      Keys of gpu-1 (gemma4:26b, ready) · ← → other instance
        NAME           HINT         STATUS   DEF CREATED  LAST USED REQS  TOKENS
      › codex          ob_sk_…mu5T  active   no  1h ago   1m ago       13 1420/31k
        2-2 of 3

        codex · id 4eggv5wQw860 · created 11-23 11:00:00 UTC
        13 requests · 1420 in / 31k out · 0 reasoning · 0 errors · 0 left early
          responses: 12 requests · 1400 in / 31k out
          messages: 1 request · 20 in / 1 out
        Limits: none
        Enter shows it, l sets its limits, o rotates it, x revokes it (asks first).

      ↑↓ ←→ move  Enter show  l limits  o rotate  x revoke  r reveal  ? help  q back"
    `);
    await ui.press('j');
    const older = await ui.waitForFrame('› old');
    expect(older).toContain('  0 requests · 0 in / 0 out · 0 reasoning · 0 errors · 0 left early\n');
    expect(older).not.toMatch(/^ {4}\w+: \d+ request/m);
  });
});
