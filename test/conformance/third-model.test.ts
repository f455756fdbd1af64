/**
 * A third model id against real Ollama (v0.33.0-rc2): Ollama serves `llama3.1:8b` (the tiny
 * model made again under that name, agent-sessions.mjs `makeAnsweringModel`, seeded); the
 * daemon refuses an instance of it until `ob-proxy models allow` adds it while the daemon runs;
 * then the instance is made ready (the daemon asks Ollama whether it lists the model) and answers
 * through the gateway exactly what Ollama answers straight, plain and streamed, charged Ollama's
 * own counts.
 */
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ok, refused } from '../helpers/cli-outcome.js';
import { makeAnsweringModel } from '../helpers/agents.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';
import { type Gateway, startGateway } from '../helpers/real-gateway.js';
import { REALUP_SKIP, type RealServer, realupRoot, startOllama } from '../helpers/realup.js';

const THIRD = 'llama3.1:8b';
type Json = Record<string, unknown>;

async function chat(base: string, body: Json, key?: string): Promise<{ status: number; text: string }> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text() };
}

/** A plain answer with what Ollama makes up per request (its id and time) taken out. */
function plain(text: string): Json {
  const { id, created, ...rest } = JSON.parse(text) as Json;
  expect(typeof id).toBe('string');
  expect(typeof created).toBe('number');
  return rest;
}

/** A stream's events, each without its id and time, and whether it ended with [DONE]. */
function events(text: string): { events: Json[]; done: boolean } {
  const data = text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
  return {
    events: data.filter((d) => d !== '[DONE]').map((d) => plain(d)),
    done: data.at(-1) === '[DONE]',
  };
}

describe.skipIf(REALUP_SKIP !== null)(
  REALUP_SKIP === null
    ? 'a third model, allowed while the daemon runs, against real Ollama'
    : `skipped: ${REALUP_SKIP}`,
  () => {
    let ollama: RealServer;
    let gw: Gateway;
    let cli: InprocCli;
    let key: string;

    beforeAll(async () => {
      ollama = await startOllama({ ctx: 8192 });
      await makeAnsweringModel(ollama.url, { model: THIRD, gguf: join(await realupRoot(), 'tiny.gguf') });
      gw = await startGateway();
      cli = inprocCli(gw.inproc.daemon.management);
    }, 180_000);

    afterAll(async () => {
      await gw?.close();
      await ollama?.stop();
    });

    it('is refused until `models allow`, then becomes an instance that Ollama serves', async () => {
      expect(await cli.run('instances', 'add', 'llama-1', '--model', THIRD, '--endpoint', ollama.url)).toEqual(
        refused(
          1,
          `Model "${THIRD}" is not allowed: the allowed models are gemma4:26b, qwen3.6:27b. Allow it first with \`ob-proxy models allow ${THIRD}\`.`,
        ),
      );
      expect(await cli.run('models', 'allow', THIRD)).toEqual(
        ok(`Allowed models: gemma4:26b, qwen3.6:27b, ${THIRD}.\n`),
      );
      expect(await cli.run('instances', 'add', 'llama-1', '--model', THIRD, '--endpoint', ollama.url)).toEqual(
        ok(
          `Added instance llama-1 (${THIRD}), state pending. Make it ready with \`ob-proxy instances ready llama-1\`.\n`,
        ),
      );
      // ready probes Ollama: it lists the model, so the instance is ready with its default key.
      const ready = await cli.json<{ state: string; defaultKey: { secret: string } }>('instances', 'ready', 'llama-1');
      expect(ready.state).toBe('ready');
      key = ready.defaultKey.secret;
    }, 60_000);

    it('answers through the gateway what Ollama answers straight, plain', async () => {
      const body = { model: THIRD, messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 12, seed: 7 };
      const straight = await chat(ollama.url, body);
      const through = await chat(gw.baseUrl, body, key);
      expect([straight.status, through.status]).toEqual([200, 200]);
      const answer = plain(through.text);
      expect(answer).toEqual(plain(straight.text));
      expect(answer).toMatchObject({ object: 'chat.completion', model: THIRD });
      const content = (answer.choices as { message: { content: string } }[])[0]!.message.content;
      expect(content.length).toBeGreaterThan(0);
      const usage = answer.usage as { prompt_tokens: number; completion_tokens: number };
      expect(usage.completion_tokens).toBeGreaterThan(0);
      const counted = await gw.usage(keyIdOf(key));
      expect([counted.requests, counted.promptTokens, counted.completionTokens]).toEqual([
        1,
        usage.prompt_tokens,
        usage.completion_tokens,
      ]);
    }, 60_000);

    it('answers through the gateway what Ollama answers straight, streamed', async () => {
      const body = {
        model: THIRD,
        messages: [{ role: 'user', content: 'Tell me a story' }],
        max_tokens: 12,
        seed: 7,
        stream: true,
        stream_options: { include_usage: true },
      };
      const straight = events((await chat(ollama.url, body)).text);
      const through = await chat(gw.baseUrl, body, key);
      expect(through.status).toBe(200);
      const relayed = events(through.text);
      expect(relayed).toEqual(straight);
      expect(relayed.done).toBe(true);
      expect(relayed.events.every((e) => e.model === THIRD)).toBe(true);
    }, 60_000);
  },
);

/** A secret's key id: `ob_sk_<id>_<random>`. */
function keyIdOf(secret: string): string {
  return secret.split('_')[2]!;
}
