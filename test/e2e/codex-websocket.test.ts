/**
 * Codex CLI (`@openai/codex`, its native binary) over the Responses API's WebSocket mode
 * (`supports_websockets = true` on its model provider): two turns, `codex exec` then
 * `codex exec resume --last`, each on a socket of its own to a daemon listening on 127.0.0.1:0,
 * in front of a simulator that serves POST /v1/responses and no WebSocket. Before each turn
 * Codex sends a warm-up (`generate: false`), which the gateway answers itself; within a turn it
 * sends the tool's output with `previous_response_id` and only the new item, which the gateway
 * makes into the whole conversation upstream.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type InstalledAgents, installAgents } from '../helpers/agents-install.mjs';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';

type Json = Record<string, unknown>;
let d: Inproc;
let sim: Simulator;
let home: string;
let key: string;
let agents: InstalledAgents;

beforeAll(async () => {
  // Codex is installed for the tests that run it, at its pinned version (agents-install.mjs).
  agents = await installAgents();
  d = await buildInproc();
  await d.daemon.listen();
  let url: string;
  ({ sim, url } = await startSim({ chunks: 3 }));
  expect((await d.manage('POST', '/v1/instances', { id: 'codex', model: MODEL, endpoint: url })).status).toBe(201);
  const ready = await d.manage('POST', '/v1/instances/codex/ready', { probe: false });
  key = (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
  home = await mkdtemp(join(tmpdir(), 'obcodexws-'));
  await mkdir(join(home, '.codex'), { recursive: true });
  await mkdir(join(home, 'work'), { recursive: true });
  await writeFile(
    join(home, '.codex', 'config.toml'),
    `model = "${MODEL}"
model_provider = "ob-proxy"
check_for_update_on_startup = false

[analytics]
enabled = false

[model_providers.ob-proxy]
name = "ob-proxy"
base_url = "${d.daemon.ctx.baseUrl}/v1"
env_key = "OB_PROXY_KEY"
wire_api = "responses"
supports_websockets = true
request_max_retries = 0
stream_max_retries = 0
`,
  );
}, 900_000);

afterAll(async () => {
  await d?.close();
  await sim?.close();
  if (home !== undefined) await rm(home, { recursive: true, force: true });
});

async function codex(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    CODEX_HOME: join(home, '.codex'),
    OB_PROXY_KEY: key,
    NO_COLOR: '1',
  };
  const common = ['exec', '--skip-git-repo-check', '--sandbox', 'read-only', '--color', 'never'];
  const child = spawn(process.execPath, [agents.codexJs, ...common, ...args], {
    env,
    cwd: join(home, 'work'),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const code = await new Promise<number | null>((done) => child.once('exit', (c) => done(c)));
  return { code, stdout, stderr };
}

it('two turns over WebSocket: warm-ups answered by the gateway, tool results continued', async () => {
  const first = await codex(['-C', join(home, 'work'), 'Say hello']);
  expect(first.code, first.stderr).toBe(0);
  expect(first.stdout).toContain('Final answer from the tool:');
  const second = await codex(['resume', '--last', 'And again']);
  expect(second.code, second.stderr).toBe(0);
  expect(second.stdout).toContain('Final answer from the tool:');
  expect(first.stdout + first.stderr + second.stdout + second.stderr).not.toContain(key);

  // A socket per turn, with its messages: a warm-up, the turn, the tool's result.
  const keyId = key.slice(6, 18);
  await expect
    .poll(() => d.logs.filter((l) => l.msg === 'websocket closed' && l.key === keyId).map((l) => l.messages))
    .toEqual([3, 3]);
  // Upstream, each a whole conversation, and no warm-up: two requests a turn, none over HTTP.
  const upstream = sim.requests.filter((r) => r.path.startsWith('/v1/') && r.method === 'POST');
  expect(upstream.map((r) => `${r.method} ${r.path}`)).toEqual(Array(4).fill('POST /v1/responses'));
  const bodies = upstream.map((r) => r.body as Json);
  for (const b of bodies) {
    expect(b).toMatchObject({ model: MODEL, stream: true });
    expect(b).not.toHaveProperty('generate');
    expect(b).not.toHaveProperty('previous_response_id');
  }
  for (const [turn, result] of [
    [0, 1],
    [2, 3],
  ] as const) {
    const asked = bodies[turn]!.input as Json[];
    const after = bodies[result]!.input as Json[];
    // The tool's result continues the turn: what was asked, the model's call, the call's output.
    expect(after.slice(0, asked.length)).toEqual(asked);
    expect(after.slice(asked.length).map((i) => i.type)).toEqual(['function_call', 'function_call_output']);
  }
  // The second turn starts from the first's whole history (a new socket, sent in full).
  expect((bodies[2]!.input as Json[]).length).toBeGreaterThan((bodies[1]!.input as Json[]).length);
  const usage = d.daemon.ctx.lifecycle.registry.keys.get(keyId)!.usage;
  expect(usage.byRoute.responses?.requests).toBe(4);
}, 180_000);
