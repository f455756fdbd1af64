/**
 * Real coding agents, at their pinned versions (test/helpers/agents-install.mjs), against real
 * Ollama: straight, as the control, and through the gateway built in process (an instance of
 * `gemma4:26b`, ready, its default key). Claude Code (`claude -p`) completes a turn with the key
 * as `x-api-key` and as a bearer token, and a second turn of the same session (`--continue`);
 * Codex (`codex exec`) completes a turn and a second (`codex exec resume --last`). After
 * `instances stop`, each fails with a message naming the revoked key, after as many tries as the
 * refusal's retry advice allows: one for Claude Code (`x-should-retry: false`), Codex's own
 * budget at once for Codex (`Retry-After: 0`; it reads no other header).
 *
 * The random model's words vary, so what is asserted is what the gateway owns: the agent's exit
 * code and result, the statuses, and what the model server received, recorded by a reverse proxy
 * in front of Ollama (test/helpers/agent-recorder.mjs) through which both the control and the
 * gateway's instance reach it: every request 200 and naming the instance's model, the history
 * of the session in the second turn's body, never the client's key. Each agent has a home and a
 * config folder of its own in a temp folder, every model setting on the instance's model
 * (test/helpers/agent-sessions.mjs), and an HTTP proxy that refuses and counts whatever it tries
 * to send past 127.0.0.1: that count stays 0.
 *
 * Ollama's model answers a few words (agent-sessions.mjs `makeAnsweringModel`), so a turn is one
 * or two requests; the first of an agent carries its whole prompt (Claude Code's is 27k tokens,
 * about 12 s on one core, more on a busy machine), hence the time-outs.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type AgentRun,
  type InstalledAgents,
  type OutboundCatcher,
  type Recorder,
  claudeArgs,
  claudeEnv,
  codexArgs,
  codexEnv,
  installAgents,
  makeAnsweringModel,
  runAgent,
  startOutboundCatcher,
  startRecorder,
  writeCodexHome,
} from '../helpers/agents.js';
import { GEMMA } from '../helpers/conformance-cases.js';
import { eventually } from '../helpers/processes.js';
import { type Gateway, startGateway } from '../helpers/real-gateway.js';
import { REALUP_SKIP, type RealServer, realupRoot, startOllama } from '../helpers/realup.js';

/** An agent's turn: a request or two, the first a cold 27k-token prompt on a shared core. */
const TURN_MS = 240_000;
const TEST_MS = TURN_MS * 2 + 30_000;
/**
 * Every first turn says the same, so that the runs of an agent share their prompt up to its end
 * and Ollama finds it in its cache (see `home`); a second turn must carry the first.
 */
const FIRST = 'Say hello.';
const SECOND = 'Say it again.';
/** The most tries an agent makes on a key refused for good: Codex's retry budget, 1 + 5. */
const CODEX_TRIES = 6;

type Json = Record<string, unknown>;
type Key = { id: string; secret: string };

const title =
  REALUP_SKIP === null
    ? 'coding agents straight to real Ollama and through ob-proxy'
    : `coding agents: skipped, ${REALUP_SKIP}`;

describe.skipIf(REALUP_SKIP !== null)(title, () => {
  let agents: InstalledAgents;
  let ollama: RealServer;
  /** In front of Ollama: the control's agents and the gateway's instances reach it through this. */
  let server: Recorder;
  let outbound: OutboundCatcher;
  let gw: Gateway;
  let root: string;

  beforeAll(async () => {
    // The first run in a checkout downloads both agents (about 700 MB): minutes on a slow link.
    [agents, ollama] = await Promise.all([installAgents(), startOllama()]);
    await makeAnsweringModel(ollama.url, { model: GEMMA, gguf: join(await realupRoot(), 'tiny.gguf') });
    server = await startRecorder(ollama.url);
    outbound = await startOutboundCatcher();
    gw = await startGateway();
    await gw.addReady('gemma', GEMMA, server.url);
    root = await mkdtemp(join(tmpdir(), 'obagents-'));
  }, 900_000);

  afterAll(async () => {
    await gw?.close();
    await server?.close();
    await outbound?.close();
    await ollama?.stop();
    if (root !== undefined) await rm(root, { recursive: true, force: true });
  });

  /**
   * The agent's home (its config folder inside) and its work folder (its cwd), one per agent for
   * all its runs: both paths are in the agent's prompt (the memory folder, the working directory)
   * ahead of most of it, so runs from one home share a prompt prefix that Ollama finds in its
   * cache, and only the first pays for the whole 27k-token prompt. Each session is told apart by
   * --continue and resume --last, which take the newest session of the folder: the test's own.
   */
  async function home(agent: 'claude' | 'codex'): Promise<{ home: string; work: string }> {
    const h = join(root, agent);
    const work = join(h, 'work');
    await mkdir(work, { recursive: true });
    return { home: h, work };
  }

  /** What the model server received from `from` on: the requests on `path`, their bodies parsed. */
  function received(from: number, path: string): { path: string; status: number | null; body: Json; headers: Json }[] {
    return server.exchanges
      .slice(from)
      .filter((x) => x.path.split('?')[0] === path)
      .map((x) => ({ path: x.path, status: x.status, body: JSON.parse(x.body) as Json, headers: x.headers as Json }));
  }

  /** The run's whole output, for a failure message. */
  const said = (r: AgentRun): string =>
    `exit ${r.code}${r.timedOut ? ' (timed out)' : ''} after ${r.ms} ms\nstdout: ${r.stdout.slice(-3000)}\nstderr: ${r.stderr.slice(-3000)}`;

  /** Claude Code's `--output-format json` result. */
  function claudeResult(r: AgentRun): Json {
    const line = r.stdout.trim().split('\n').at(-1) ?? '';
    try {
      return JSON.parse(line) as Json;
    } catch {
      throw new Error(`claude printed no JSON result: ${said(r)}`);
    }
  }

  /** Codex's `--json` events. */
  function codexEvents(r: AgentRun): Json[] {
    return r.stdout
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Json);
  }

  /**
   * Every request the server received since `from` answered 200, on the instance's model, without
   * the client's key; through the gateway (`key` given), each counted on the key, none as an error.
   */
  async function expectServed(from: number, path: string, key: Key | null): Promise<Json[]> {
    const got = received(from, path);
    expect(got.length, `requests on ${path}`).toBeGreaterThan(0);
    for (const r of got) {
      expect(r.status, `${r.path}`).toBe(200);
      expect(r.body.model).toBe(GEMMA);
      if (key !== null) {
        expect(JSON.stringify(r.headers)).not.toContain(key.secret);
        expect(r.headers['x-api-key']).toBeUndefined();
        expect(r.headers.authorization).toBeUndefined();
      }
    }
    if (key !== null) {
      // An exchange is counted when its relay has ended it, just after the agent read its end.
      await eventually(async () => (await gw.usage(key.id)).requests >= got.length, 'every request counted');
      expect(await gw.usage(key.id)).toMatchObject({ requests: got.length, errors: 0 });
    }
    expect(outbound.hits, 'requests past 127.0.0.1').toEqual([]);
    return got.map((r) => r.body);
  }

  /** The control, straight to Ollama (through the recorder), and the gateway, with a key of the test's own. */
  const TARGETS = [
    { via: 'straight to Ollama (the control)', gateway: false },
    { via: 'through the gateway', gateway: true },
  ] as const;

  async function target(gateway: boolean, name: string): Promise<{ baseUrl: string; key: Key | null; secret: string }> {
    if (!gateway) return { baseUrl: server.url, key: null, secret: 'not-a-key' };
    const key = await gw.createKey('gemma', name);
    return { baseUrl: gw.baseUrl, key, secret: key.secret };
  }

  const claude = (
    o: { home: string; work: string },
    t: { baseUrl: string; secret: string },
    auth: 'x-api-key' | 'bearer',
    prompt: string,
    continueSession = false,
  ): Promise<AgentRun> =>
    runAgent(agents.claude, claudeArgs(prompt, { model: GEMMA, continueSession }), {
      env: claudeEnv({ home: o.home, baseUrl: t.baseUrl, key: t.secret, auth, model: GEMMA, outbound: outbound.url }),
      cwd: o.work,
      timeoutMs: TURN_MS,
    });

  /** A turn Claude Code completed: exit 0 and a result that is no error. */
  const expectClaudeTurn = (r: AgentRun): Json => {
    expect(r.code, said(r)).toBe(0);
    const result = claudeResult(r);
    expect(result, said(r)).toMatchObject({ type: 'result', subtype: 'success', is_error: false });
    expect(typeof result.result).toBe('string');
    return result;
  };

  const codex = async (
    o: { home: string; work: string },
    t: { baseUrl: string; secret: string },
    prompt: string,
    resume = false,
  ): Promise<AgentRun> => {
    await writeCodexHome(o.home, { baseUrl: t.baseUrl, model: GEMMA });
    return runAgent(process.execPath, codexArgs(agents.codexJs, prompt, { work: o.work, resume, json: true }), {
      env: codexEnv({ home: o.home, key: t.secret, outbound: outbound.url }),
      cwd: o.work,
      timeoutMs: TURN_MS,
    });
  };

  /** A turn Codex completed (exit 0, `turn.completed`, no `turn.failed`): its thread's id. */
  const expectCodexTurn = (r: AgentRun): string => {
    expect(r.code, said(r)).toBe(0);
    const events = codexEvents(r);
    expect(events.map((e) => e.type)).toContain('turn.completed');
    expect(events.map((e) => e.type)).not.toContain('turn.failed');
    const thread = events.find((e) => e.type === 'thread.started')?.thread_id;
    expect(typeof thread, said(r)).toBe('string');
    return thread as string;
  };

  describe.each(TARGETS)('Claude Code, $via', ({ gateway }) => {
    for (const auth of ['x-api-key', 'bearer'] as const) {
      it(
        `claude -p completes a turn, the key as ${auth === 'x-api-key' ? 'x-api-key (ANTHROPIC_API_KEY)' : 'a bearer token (ANTHROPIC_AUTH_TOKEN)'}`,
        async () => {
          const t = await target(gateway, `claude-${auth}`);
          const from = server.exchanges.length;
          const r = await claude(await home('claude'), t, auth, FIRST);
          expectClaudeTurn(r);
          const bodies = await expectServed(from, '/v1/messages', t.key);
          // Claude Code's turn as it sent it: its environment as a system turn inside messages.
          expect(bodies[0]!.messages).toEqual(expect.arrayContaining([expect.objectContaining({ role: 'system' })]));
          expect(r.stdout + r.stderr).not.toContain(t.secret);
        },
        TEST_MS,
      );
    }

    it(
      'a second turn of the same session (--continue) completes and carries the first',
      async () => {
        const t = await target(gateway, 'claude-continue');
        const o = await home('claude');
        const start = server.exchanges.length;
        const first = expectClaudeTurn(await claude(o, t, 'x-api-key', FIRST));
        const from = server.exchanges.length;
        const second = expectClaudeTurn(await claude(o, t, 'x-api-key', SECOND, true));
        expect(second.session_id).toBe(first.session_id);
        // Both turns' requests served (and counted on the key); the second turn's first carries the first turn.
        await expectServed(start, '/v1/messages', t.key);
        const text = JSON.stringify(received(from, '/v1/messages')[0]!.body.messages);
        expect(text).toContain(FIRST);
        expect(text).toContain(SECOND);
      },
      TEST_MS * 2,
    );
  });

  describe.each(TARGETS)('Codex, $via', ({ gateway }) => {
    it(
      'codex exec completes a turn, and codex exec resume --last a second that carries the first',
      async () => {
        const t = await target(gateway, 'codex');
        const o = await home('codex');
        const start = server.exchanges.length;
        const r = await codex(o, t, FIRST);
        const thread = expectCodexTurn(r);
        expect(r.stdout + r.stderr).not.toContain(t.secret);
        const from = server.exchanges.length;
        expect(expectCodexTurn(await codex(o, t, SECOND, true))).toBe(thread);
        await expectServed(start, '/v1/responses', t.key);
        const text = JSON.stringify(received(from, '/v1/responses')[0]!.body.input);
        expect(text).toContain(FIRST);
        expect(text).toContain(SECOND);
      },
      TEST_MS * 2,
    );
  });

  /**
   * A revoked key is a permanent refusal, and an agent that retries it only delays its user. Seen
   * with a server that answers every request 401: Claude Code 2.1.328 sends one request when the
   * answer carries `x-should-retry: false`, and eleven over three minutes without it. Codex
   * 0.171 retries a 401 (and a 403) five times whatever `x-should-retry` says, with a backoff of
   * about 6.2 s in all, unless the answer carries `Retry-After: 0` (then six requests in under a
   * second); a 400 it does not retry.
   */
  describe('after instances stop', () => {
    let stopped: string;

    beforeAll(async () => {
      stopped = await gw.addReady('stopped', GEMMA, server.url);
      const r = await gw.inproc.manage('POST', '/v1/instances/stopped/stop');
      expect(r.status, r.text).toBe(200);
    });

    /** The gateway's refusal, as a client sees it: 401 revoked_api_key, not to be retried. */
    it('the key is refused: 401 revoked_api_key with x-should-retry: false', async () => {
      const res = await fetch(`${gw.baseUrl}/v1/messages`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': stopped, 'anthropic-version': '2023-06-01' },
        body: JSON.stringify({ model: GEMMA, max_tokens: 8, messages: [{ role: 'user', content: 'Hi' }] }),
      });
      expect(res.status).toBe(401);
      expect(res.headers.get('x-should-retry')).toBe('false');
      expect(await res.text()).toContain('revoked_api_key');
    });

    /** The gateway's refusals of the revoked key logged since line `from` of its log. */
    const refusals = (from: number): number =>
      gw.inproc.logs.slice(from).filter((l) => l.msg === 'refused' && l.code === 'revoked_api_key').length;

    /**
     * What the agent printed names the key's revocation, it tried no more than `maxTries` times,
     * and nothing reached the model server.
     */
    const expectRefused = (r: AgentRun, from: { exchanges: number; logs: number }, maxTries: number): void => {
      expect(r.code, said(r)).not.toBe(0);
      expect(r.stdout + r.stderr, said(r)).toMatch(/API key.*revoked/i);
      const tries = refusals(from.logs);
      expect(tries, said(r)).toBeGreaterThanOrEqual(1);
      expect(tries, said(r)).toBeLessThanOrEqual(maxTries);
      expect(server.exchanges.length - from.exchanges, 'requests that reached the model server').toBe(0);
      expect(outbound.hits).toEqual([]);
    };
    const mark = (): { exchanges: number; logs: number } => ({
      exchanges: server.exchanges.length,
      logs: gw.inproc.logs.length,
    });

    it(
      'claude -p fails after one try, naming the revoked key',
      async () => {
        const from = mark();
        const r = await claude(await home('claude'), { baseUrl: gw.baseUrl, secret: stopped }, 'x-api-key', FIRST);
        expect(claudeResult(r), said(r)).toMatchObject({ is_error: true, api_error_status: 401 });
        expectRefused(r, from, 1);
      },
      TEST_MS,
    );

    it(
      `codex exec fails within its ${CODEX_TRIES} tries, naming the revoked key`,
      async () => {
        const from = mark();
        const r = await codex(await home('codex'), { baseUrl: gw.baseUrl, secret: stopped }, FIRST);
        expect(
          codexEvents(r).map((e) => e.type),
          said(r),
        ).toContain('turn.failed');
        expectRefused(r, from, CODEX_TRIES);
      },
      TEST_MS,
    );
  });
});
