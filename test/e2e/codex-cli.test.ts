/**
 * Codex CLI (`@openai/codex`, its native binary, installed by test/helpers/agents-install.mjs at
 * its pinned version, not by the root `npm ci`) through the gateway: `codex exec` runs one turn
 * non-interactively, with HOME and CODEX_HOME in a temporary folder whose config.toml defines a
 * model provider at a daemon listening on 127.0.0.1:0 (the README's snippet, `wire_api =
 * "responses"`, the key in the variable `env_key` names). The turn is run against a simulator
 * that serves /v1/responses (passed through) and one that does not (translated to chat
 * completions). Codex sends its tools with every request; the simulated model calls the first
 * (exec_command), Codex answers with the call's output, and the model's final answer ends the
 * turn: two upstream calls. The time from Codex's start to its first upstream request is
 * printed.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type InstalledAgents, installAgents } from '../helpers/agents-install.mjs';
import { type Inproc, MODEL, buildInproc, startSim } from '../helpers/inproc.js';

let d: Inproc;
let home: string;
let agents: InstalledAgents;
const sims: Simulator[] = [];

beforeAll(async () => {
  // The first run in a checkout downloads Codex (about 100 MB): minutes on a slow link.
  agents = await installAgents();
  d = await buildInproc();
  await d.daemon.listen();
  home = await mkdtemp(join(tmpdir(), 'obcodex-'));
}, 900_000);

afterAll(async () => {
  await d?.close();
  for (const s of sims) await s.close();
  if (home !== undefined) await rm(home, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  startedAt: number;
}

/** `codex exec PROMPT` with its own HOME, the gateway as its model provider, the key in OB_PROXY_KEY. */
async function codexExec(name: string, key: string, prompt: string): Promise<Run> {
  const userHome = join(home, name);
  const codexHome = join(userHome, '.codex');
  const work = join(userHome, 'work');
  await mkdir(codexHome, { recursive: true });
  await mkdir(work, { recursive: true });
  await writeFile(
    join(codexHome, 'config.toml'),
    `model = "${MODEL}"
model_provider = "ob-proxy"

[model_providers.ob-proxy]
name = "ob-proxy"
base_url = "${d.daemon.ctx.baseUrl}/v1"
env_key = "OB_PROXY_KEY"
wire_api = "responses"
`,
  );
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: userHome,
    CODEX_HOME: codexHome,
    OB_PROXY_KEY: key,
    NO_COLOR: '1',
  };
  const startedAt = Date.now();
  const child = spawn(
    process.execPath,
    [
      agents.codexJs,
      'exec',
      '--skip-git-repo-check',
      '--ephemeral',
      '--sandbox',
      'read-only',
      '--color',
      'never',
      '-C',
      work,
      prompt,
    ],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const code = await new Promise<number | null>((done) => child.once('exit', (c) => done(c)));
  return { code, stdout, stderr, startedAt };
}

type Json = Record<string, unknown>;

describe.each([
  ['passed through', true],
  ['translated', false],
] as const)('codex exec, %s', (name, responses) => {
  it('completes a turn through the gateway: exit 0, the model’s answer printed, two upstream calls', async () => {
    const { sim, url } = await startSim({ chunks: 3, responses });
    sims.push(sim);
    const id = responses ? 'codex-pass' : 'codex-xlate';
    expect((await d.manage('POST', '/v1/instances', { id, model: MODEL, endpoint: url })).status).toBe(201);
    const ready = await d.manage('POST', `/v1/instances/${id}/ready`, { probe: false });
    const key = (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;

    const run = await codexExec(id, key, 'Say hello');
    expect(run.code, run.stderr).toBe(0);
    // The model's final answer, after Codex sent it the tool's output.
    expect(run.stdout).toContain('Final answer from the tool:');
    expect(run.stdout + run.stderr).not.toContain(key);

    // The clients' requests: the instance's own GET /v1/models (when added) aside.
    const upstream = sim.requests.filter((r) => r.path.startsWith('/v1/') && r.method === 'POST');
    const path = responses ? '/v1/responses' : '/v1/chat/completions';
    expect(upstream.map((r) => `${r.method} ${r.path}`)).toEqual(
      responses
        ? ['POST /v1/responses', 'POST /v1/responses']
        : ['POST /v1/responses', 'POST /v1/chat/completions', 'POST /v1/chat/completions'],
    );
    const bodies = upstream.filter((r) => r.path === path).map((r) => r.body as Json);
    for (const b of bodies) {
      expect(b.model).toBe(MODEL);
      expect(b.stream).toBe(true);
    }
    // Our headers only: never the client's key.
    for (const r of upstream) expect(r.headers.authorization).toBeUndefined();
    const [first, second] = bodies as [Json, Json];
    if (responses) {
      expect((first.input as Json[]).at(-1)).toMatchObject({ type: 'message', role: 'user' });
      expect((second.input as Json[]).slice(-2).map((i) => i.type)).toEqual(['function_call', 'function_call_output']);
      expect((first.tools as Json[]).map((t) => t.type)).toContain('web_search');
    } else {
      expect((first.messages as Json[]).at(-1)).toMatchObject({ role: 'user' });
      expect((second.messages as Json[]).slice(-2).map((m) => m.role)).toEqual(['assistant', 'tool']);
      // Tools other than functions are left out; the function tools are sent as chat's.
      const tools = first.tools as Json[];
      expect(tools.length).toBeGreaterThan(0);
      expect(tools.every((t) => t.type === 'function' && typeof (t.function as Json).name === 'string')).toBe(true);
      expect(tools.map((t) => (t.function as Json).name)).toContain('exec_command');
    }
    const firstAt = (upstream[0] as { startedAt: number }).startedAt;
    console.log(`codex exec (${name}): first upstream request ${firstAt - run.startedAt} ms after start`);
  }, 120_000);
});
