/**
 * Prometheus metrics: after a known mix of requests, one scrape shows exactly those
 * counts per instance, key and code, histograms whose counts match, tokens as the model server
 * reported them, and no secret or key name. The real daemon, simulator and text format.
 */
import { readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import OpenAI from 'openai';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SECRET_PATTERN } from '../../src/domain/api-key.js';
import { type Harness, MODEL, chatBody, post, readyInstance, startHarness, startSim } from '../reliability/harness.js';
import type { Simulator } from '../../simulator/simulator.js';

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The samples of a Prometheus text exposition (comments skipped). */
function parseExposition(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (m === null) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

function value(samples: Sample[], name: string, labels: Record<string, string>): number | undefined {
  const hit = samples.filter(
    (s) =>
      s.name === name &&
      Object.entries(labels).every(([k, v]) => s.labels[k] === v) &&
      Object.keys(s.labels).length === Object.keys(labels).length,
  );
  return hit.length === 1 ? hit[0]!.value : hit.length === 0 ? undefined : Number.NaN;
}

async function scrape(h: Harness): Promise<{ text: string; samples: Sample[] }> {
  const url = h.daemon.ctx.metricsUrl;
  if (url === null) throw new Error('metrics off');
  const res = await fetch(url);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return { text, samples: parseExposition(text) };
}

describe('metrics with key labels', () => {
  let h: Harness;
  let sim: Simulator;
  let k1: string;
  let k2: string;
  let k1Id: string;
  let k2Id: string;
  const completionTokens = { k1: 0, k2: 0 };
  const promptTokens = { k1: 0, k2: 0 };

  beforeAll(async () => {
    h = await startHarness({ metricsPort: 0 });
    const s = await startSim();
    sim = s.sim;
    k1 = await readyInstance(h, 'gpu-1', s.url);
    k1Id = [...h.daemon.ctx.lifecycle.registry.keys.values()][0]!.id;
    const created = await h.daemon.ctx.lifecycle.createKey('gpu-1', 'team-alpha-notebook');
    k2 = created.secret;
    k2Id = created.key.id;

    const client = (key: string): OpenAI => new OpenAI({ baseURL: `${h.baseUrl}/v1`, apiKey: key, maxRetries: 0 });
    for (let i = 0; i < 3; i++) {
      const r = (await client(k1).chat.completions.create(chatBody('hi') as never)) as OpenAI.ChatCompletion;
      completionTokens.k1 += r.usage!.completion_tokens;
      promptTokens.k1 += r.usage!.prompt_tokens;
    }
    for (let i = 0; i < 2; i++) {
      const stream = await client(k1).chat.completions.create({
        model: MODEL,
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: 'user', content: 'stream please' }],
      });
      for await (const c of stream) {
        if (c.usage) {
          completionTokens.k1 += c.usage.completion_tokens;
          promptTokens.k1 += c.usage.prompt_tokens;
        }
      }
    }
    const r2 = (await client(k2).chat.completions.create(chatBody('one two three') as never)) as OpenAI.ChatCompletion;
    completionTokens.k2 += r2.usage!.completion_tokens;
    promptTokens.k2 += r2.usage!.prompt_tokens;
    expect((await post(h.baseUrl, k2, chatBody('x', { model: 'qwen3.6:27b' }))).status).toBe(400);
    expect((await post(h.baseUrl, k1, chatBody('x [[sim fail=http-error errorStatus=503]]'))).status).toBe(503);
    expect((await post(h.baseUrl, null, chatBody('x'))).status).toBe(400);
    expect(
      (await post(h.baseUrl, 'ob_sk_000000000000_00000000000000000000000000000000000000', chatBody('x'))).status,
    ).toBe(401);
    expect((await post(h.baseUrl, 'ob_sk_nope', chatBody('x'))).status).toBe(401);
    await h.daemon.ctx.lifecycle.revokeKey(k2Id);
    expect((await post(h.baseUrl, k2, chatBody('x'))).status).toBe(401);
  });
  afterAll(async () => {
    await h.stop();
    await sim.close();
  });

  it('counts every request by instance, key id and status, and key refusals by code', async () => {
    const { samples } = await scrape(h);
    const requests = samples
      .filter((s) => s.name === 'ob_proxy_requests_total')
      .map((s) => [s.labels.instance, s.labels.key, s.labels.code, s.value]);
    expect(requests.sort()).toEqual(
      [
        ['', '', '400', 1],
        ['', '', '401', 3],
        ['gpu-1', k1Id, '200', 5],
        ['gpu-1', k1Id, '503', 1],
        ['gpu-1', k2Id, '200', 1],
        ['gpu-1', k2Id, '400', 1],
      ].sort(),
    );
    const refusals = samples
      .filter((s) => s.name === 'ob_proxy_key_refusals_total')
      .map((s) => [s.labels.code, s.value]);
    expect(refusals.sort()).toEqual([
      ['invalid_api_key', 2],
      ['missing_api_key', 1],
      ['revoked_api_key', 1],
    ]);
  });

  it("histograms count what they measure; tokens are the model server's; streams, errors, keys and revocations", async () => {
    const { samples, text } = await scrape(h);
    // The gauges the daemon writes itself follow prom-client's, each once, line by line.
    expect(
      text.split('\n').filter((l) => l.startsWith('# TYPE ob_proxy_keys ') || l.startsWith('# HELP ob_proxy_keys ')),
    ).toEqual(['# HELP ob_proxy_keys API keys by instance and status.', '# TYPE ob_proxy_keys gauge']);
    expect(value(samples, 'ob_proxy_request_duration_seconds_count', { instance: 'gpu-1' })).toBe(8);
    expect(value(samples, 'ob_proxy_request_duration_seconds_count', { instance: '' })).toBe(4);
    // Only requests that reached the model server: 3 + 2 + 1 + the 503.
    expect(value(samples, 'ob_proxy_upstream_first_byte_seconds_count', { instance: 'gpu-1' })).toBe(7);
    expect(value(samples, 'ob_proxy_added_seconds_count', {})).toBe(7);
    expect(value(samples, 'ob_proxy_tokens_total', { instance: 'gpu-1', key: k1Id, kind: 'completion' })).toBe(
      completionTokens.k1,
    );
    expect(value(samples, 'ob_proxy_tokens_total', { instance: 'gpu-1', key: k1Id, kind: 'prompt' })).toBe(
      promptTokens.k1,
    );
    expect(value(samples, 'ob_proxy_tokens_total', { instance: 'gpu-1', key: k2Id, kind: 'completion' })).toBe(
      completionTokens.k2,
    );
    expect(value(samples, 'ob_proxy_open_streams', { instance: 'gpu-1' })).toBe(0);
    expect(value(samples, 'ob_proxy_upstream_errors_total', { instance: 'gpu-1', kind: 'upstream_error' })).toBe(1);
    expect(value(samples, 'ob_proxy_keys', { instance: 'gpu-1', status: 'active' })).toBe(1);
    expect(value(samples, 'ob_proxy_keys', { instance: 'gpu-1', status: 'revoked' })).toBe(1);
    expect(value(samples, 'ob_proxy_revocations_total', { reason: 'manual' })).toBe(1);
    expect(value(samples, 'ob_proxy_store_write_seconds_count', {})).toBeGreaterThanOrEqual(4);
    expect(value(samples, 'ob_proxy_process_cpu_seconds_total', {})).toBeGreaterThan(0);
    expect(sim.requests.filter((r) => r.path === '/v1/chat/completions')).toHaveLength(7);
  });

  it("process metrics: prom-client's default set but its GC histogram, which watched every collection", async () => {
    const { text } = await scrape(h);
    const processNames = (exposition: string): string[] =>
      [...exposition.matchAll(/^# TYPE (ob_proxy_(?:process|nodejs)_\w+) /gm)].map((m) => m[1]!).sort();
    // What collectDefaultMetrics registers, in a registry of this test's own.
    const defaults = new Registry();
    collectDefaultMetrics({ register: defaults, prefix: 'ob_proxy_' });
    const expected = processNames(await defaults.metrics()).filter((n) => n !== 'ob_proxy_nodejs_gc_duration_seconds');
    expect(expected.length).toBeGreaterThan(15);
    expect(processNames(text)).toEqual(expected);
  });

  it('every series the Grafana dashboard in docs/ queries is one the daemon exposes', async () => {
    const { samples } = await scrape(h);
    const exposed = new Set(samples.map((s) => s.name));
    const dashboard = JSON.parse(
      await readFile(new URL('../../docs/grafana-dashboard.json', import.meta.url), 'utf8'),
    ) as { panels: { targets: { expr: string }[] }[] };
    const used = new Set(
      dashboard.panels.flatMap((p) =>
        p.targets.flatMap((t) => [...t.expr.matchAll(/\bob_proxy_\w+/g)].map((m) => m[0])),
      ),
    );
    expect(used.size).toBeGreaterThan(10);
    for (const name of used) expect(exposed.has(name), name).toBe(true);
  });

  it('shows no secret and no key name, and is not on the public port', async () => {
    const { text } = await scrape(h);
    expect(text).not.toMatch(SECRET_PATTERN);
    for (const secret of [k1, k2]) expect(text).not.toContain(secret.slice(-12));
    expect(text).not.toContain('team-alpha-notebook');
    const pub = await fetch(`${h.baseUrl}/metrics`);
    expect(pub.status).toBe(404);
    expect(((await pub.json()) as { error: { code: string } }).error.code).toBe('route_not_found');
  });
});

it('OB_PROXY_METRICS_KEY_LABEL=off drops the key label; without --metrics-port nothing listens', async () => {
  const h = await startHarness({ metricsPort: 0, metricsKeyLabel: false });
  const { sim, url } = await startSim();
  try {
    const key = await readyInstance(h, 'gpu-2', url);
    expect((await post(h.baseUrl, key, chatBody('hi'))).status).toBe(200);
    const { samples } = await scrape(h);
    expect(samples.filter((s) => s.name === 'ob_proxy_requests_total').map((s) => s.labels)).toEqual([
      { instance: 'gpu-2', code: '200' },
    ]);
    expect(samples.filter((s) => s.name === 'ob_proxy_tokens_total').every((s) => !('key' in s.labels))).toBe(true);
  } finally {
    await h.stop();
    await sim.close();
  }
  const off = await startHarness();
  try {
    expect(off.daemon.ctx.metricsUrl).toBeNull();
    expect(off.daemon.ctx.metrics).toBeNull();
  } finally {
    await off.stop();
  }
});

/** One raw HTTP/1.1 exchange on a connection of its own: what an SDK would never send. */
function rawExchange(baseUrl: string, text: string): Promise<string> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    let got = '';
    const s = connect(Number(port), hostname, () => s.end(text));
    s.setEncoding('utf8');
    s.on('data', (d: string) => (got += d));
    s.on('error', reject);
    s.on('close', () => resolve(got));
  });
}

it("counts the chat route's answers whatever its URL looks like, and no other route's", async () => {
  const h = await startHarness({ metricsPort: 0 });
  const { sim, url } = await startSim();
  try {
    const key = await readyInstance(h, 'gpu-3', url);
    const keyId = [...h.daemon.ctx.lifecycle.registry.keys.values()][0]!.id;
    const send = async (path: string, method = 'POST'): Promise<number> => {
      const res = await fetch(`${h.baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        ...(method === 'POST' ? { body: JSON.stringify(chatBody('hi')) } : {}),
      });
      await res.arrayBuffer();
      return res.status;
    };
    // The chat route: its exact path, with a query, with a trailing slash.
    expect(await send('/v1/chat/completions')).toBe(200);
    expect(await send('/v1/chat/completions?x=1')).toBe(200);
    expect(await send('/v1/chat/completions/')).toBe(200);
    // Other routes and no route: not chat completions.
    expect(await send('/v1/models', 'GET')).toBe(200);
    expect(await send('/v1/chat/completions', 'GET')).toBe(404);
    expect(await send('/v1/chat/completion')).toBe(404);
    expect(await send('/v1/models')).toBe(404);
    // Refused by the app's own check before the route's key check: still the chat route's answer.
    const noHost = await rawExchange(
      h.baseUrl,
      'POST /v1/chat/completions HTTP/1.1\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}',
    );
    expect(noHost).toMatch(/^HTTP\/1\.1 400 /);
    const { samples } = await scrape(h);
    expect(
      samples
        .filter((s) => s.name === 'ob_proxy_requests_total')
        .map((s) => [s.labels.instance, s.labels.key, s.labels.code, s.value])
        .sort(),
    ).toEqual(
      [
        ['', '', '400', 1],
        ['gpu-3', keyId, '200', 3],
      ].sort(),
    );
    expect(value(samples, 'ob_proxy_request_duration_seconds_count', { instance: 'gpu-3' })).toBe(3);
  } finally {
    await h.stop();
    await sim.close();
  }
});
