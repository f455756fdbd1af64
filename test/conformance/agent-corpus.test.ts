/**
 * The differential corpus: every request body real clients sent (test/fixtures/agent-bodies/,
 * captured by scripts/capture-agent-bodies.mjs from Claude Code 2.1.328, Codex CLI 0.171.0, the
 * OpenAI Agents SDK and the AI SDK), sent straight to real Ollama and through the gateway, on its
 * route, with its path, query string and headers as its client sent them. The gateway is a gate,
 * not an authority (docs/contract.md §6): a body Ollama accepts must not be refused, and must be
 * answered as Ollama answers it. A body the gateway refuses fails its test with the gateway's
 * status and message.
 *
 * Why the answers can be compared whole: the agents send no seed, and Ollama samples an unseeded
 * request with a random one (Claude Code's first body sent three times got three different
 * answers). The test's Ollama serves `gemma4:26b` made again from the same weights and template
 * with a default seed (agent-sessions.mjs `makeAnsweringModel`). Seeded, one body gets one answer
 * once its prompt is in the server's prompt cache: a prompt computed cold (a 27k-token prompt in
 * batches) gives other logits than the same prompt found in the cache with its last token
 * computed again, and so another sample (seen: the cold answer differed, the next two were the
 * same). So each body is sent once to warm the cache, then straight and through the gateway; the
 * control test shows the two warm answers agree without the gateway. The same model stops where
 * it would begin a tool call, so each answer is a few words, not a thousand tokens of random
 * tool calls.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AgentFixture, agentFixtures, makeAnsweringModel, routeOf, sendFixture } from '../helpers/agents.js';
import { GEMMA } from '../helpers/conformance-cases.js';
import { type Gateway, startGateway } from '../helpers/real-gateway.js';
import { REALUP_SKIP, type RealServer, realupRoot, startOllama } from '../helpers/realup.js';
import { type Exchange, normalised } from '../helpers/wire-exchange.js';

const FIXTURES = agentFixtures();

/** Claude Code's first body is a 27k-token prompt: about 12 s of Ollama's time on one core, cold. */
const PER_BODY_MS = 240_000;

/** What a refusal or a difference shows: the status and the start of the body. */
const said = (x: Exchange): string => `${x.status} ${x.text.slice(0, 800)}`;

const title =
  REALUP_SKIP === null
    ? 'agent corpus: each body straight to real Ollama and through ob-proxy'
    : `agent corpus: skipped, ${REALUP_SKIP}`;

describe.skipIf(REALUP_SKIP !== null)(title, () => {
  let ollama: RealServer;
  let gw: Gateway;
  let key: string;

  beforeAll(async () => {
    ollama = await startOllama();
    await makeAnsweringModel(ollama.url, { model: GEMMA, gguf: join(await realupRoot(), 'tiny.gguf') });
    gw = await startGateway();
    key = await gw.addReady('gemma', GEMMA, ollama.url);
  }, 180_000);

  afterAll(async () => {
    await gw?.close();
    await ollama?.stop();
  });

  it('holds at least 10 bodies each from Claude Code and Codex, tool turns included, and no secret', () => {
    const of = (client: string): AgentFixture[] => FIXTURES.filter((f) => f.client === client);
    expect(of('claude-code').length).toBeGreaterThanOrEqual(10);
    expect(of('codex').length).toBeGreaterThanOrEqual(10);
    expect(of('openai-agents').length).toBeGreaterThan(0);
    expect(of('ai-sdk').length).toBeGreaterThan(0);
    const text = JSON.stringify(FIXTURES);
    for (const block of ['"tool_use"', '"tool_result"', '"thinking"', '"role":"system"'])
      expect(JSON.stringify(of('claude-code'))).toContain(block);
    for (const item of ['"function_call"', '"function_call_output"', '"reasoning"', '"role":"developer"'])
      expect(JSON.stringify(of('codex'))).toContain(item);
    expect(text).not.toMatch(/ob_sk_|"authorization"|"x-api-key"/i);
    for (const f of FIXTURES) expect(f.body.model, f.file).toBe(GEMMA);
  });

  it(
    'control: Ollama answers a body of each client the same way twice once it is cached, apart from ids',
    async () => {
      for (const client of ['claude-code', 'codex', 'openai-agents', 'ai-sdk']) {
        const f = FIXTURES.find((x) => x.client === client)!;
        const route = routeOf(f.path);
        await sendFixture(ollama.url, f, null);
        const first = await sendFixture(ollama.url, f, null);
        const second = await sendFixture(ollama.url, f, null);
        expect(first.status, `${f.file}: ${said(first)}`).toBe(200);
        expect(normalised(route, second), f.file).toEqual(normalised(route, first));
      }
    },
    PER_BODY_MS * 2,
  );

  it.each(FIXTURES.map((f) => ({ ...f, name: f.file })))(
    '$name: the same status and answer straight and through the gateway',
    async (f) => {
      const route = routeOf(f.path);
      // The prompt into the server's cache: a cold prompt is sampled otherwise (see above).
      await sendFixture(ollama.url, f, null);
      const straight = await sendFixture(ollama.url, f, null);
      const via = await sendFixture(gw.baseUrl, f, key);
      expect(straight.status, `Ollama: ${said(straight)}`).toBe(200);
      expect(via.status, `the gateway answered ${said(via)}\nwhere Ollama answered ${straight.status}`).toBe(
        straight.status,
      );
      expect(normalised(route, via)).toEqual(normalised(route, straight));
    },
    PER_BODY_MS,
  );
});
