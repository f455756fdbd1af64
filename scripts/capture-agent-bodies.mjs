#!/usr/bin/env node
/* global Buffer, console, process, setTimeout */
/**
 * Captures the request bodies real clients send, for the differential corpus
 * (test/fixtures/agent-bodies/, test/conformance/agent-corpus.test.ts):
 *
 *   npx node scripts/capture-agent-bodies.mjs [--only claude-code,codex,openai-agents,ai-sdk]
 *
 * A recording reverse proxy (test/helpers/agent-recorder.mjs) stands in front of real Ollama
 * (`start-ollama` from the realup folder, `OB_PROXY_REALUP` or ../shared/realup), and each client
 * runs real sessions through it: Claude Code (`claude -p`, then `--continue`), Codex (`codex
 * exec`, then `codex exec resume --last`), the OpenAI Agents SDK and the AI SDK (`ai` with
 * @ai-sdk/openai, store: false). Every request is kept as a fixture
 * `<client>@<version>/NN-<step>-<what>.json`: the method, the path with its query string, the
 * headers that matter (content-type, anthropic-version, anthropic-beta) and the body as sent.
 *
 * A random-weight model never calls a tool the way a session needs, so the recorder answers
 * some requests itself (`scripted` below): a tool call (Read, Bash, ToolSearch, Write, Agent for
 * Claude Code; exec_command, create_goal, get_goal, a namespaced tool, a web search for Codex; the
 * SDKs' own function), with reasoning where the API has it, as the real APIs stream them. The
 * agent then runs the tool and sends its result: that next body, and every later one, is what
 * the agent really sends. Every other request is answered by Ollama, whose model is made to
 * answer a few words (test/helpers/agent-sessions.mjs `makeAnsweringModel`). A fixture's
 * `answeredBy` says who answered the request.
 *
 * The agents are the pinned ones (test/helpers/agents-install.mjs), each with a home of its own,
 * every request naming `gemma4:26b` (checked), nothing sent past 127.0.0.1 (an HTTP proxy that
 * refuses and counts; checked), and a made-up key that no fixture may hold (checked).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startOutboundCatcher, startRecorder } from '../test/helpers/agent-recorder.mjs';
import {
  claudeArgs,
  claudeEnv,
  codexArgs,
  codexEnv,
  makeAnsweringModel,
  runAgent,
  writeCodexHome,
} from '../test/helpers/agent-sessions.mjs';
import { installAgents } from '../test/helpers/agents-install.mjs';

const REPO = resolve(import.meta.dirname, '..');
const OUT = join(REPO, 'test/fixtures/agent-bodies');
const MODEL = 'gemma4:26b';
/** Made up: Ollama reads no key. No fixture may hold it. */
const KEY = `ob_sk_capture${randomBytes(16).toString('hex')}`;
/** Ollama's first answer to a 27k-token prompt takes about 12 s on one core; a session, a few requests. */
const SESSION_MS = 10 * 60_000;
const KEPT_HEADERS = ['content-type', 'anthropic-version', 'anthropic-beta'];
const CLIENTS = ['claude-code', 'codex', 'openai-agents', 'ai-sdk'];

const only = (() => {
  const i = process.argv.indexOf('--only');
  return i < 0 ? CLIENTS : process.argv[i + 1].split(',');
})();
for (const c of only) if (!CLIENTS.includes(c)) throw new Error(`--only: no client ${c} (${CLIENTS.join(', ')})`);

const log = (...a) => console.error('capture:', ...a);

// ---------------------------------------------------------------------------------------------
// Real Ollama

function realupDir() {
  const candidates = [
    ...(process.env.OB_PROXY_REALUP ? [resolve(process.env.OB_PROXY_REALUP)] : []),
    resolve(REPO, '../shared/realup'),
    '/work/shared/realup',
  ];
  const dir = candidates.find((d) => existsSync(join(d, 'start-ollama')));
  if (dir === undefined) throw new Error(`no realup folder: none of ${candidates.join(', ')} holds start-ollama`);
  return dir;
}

async function startOllama(realup) {
  const state = await mkdtemp(join(tmpdir(), 'capture-ollama-'));
  const port = 20000 + Math.floor(Math.random() * 20000);
  const proc = spawn(join(realup, 'start-ollama'), [String(port), state], {
    env: { ...process.env, THREADS: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  proc.stdout.setEncoding('utf8').on('data', (s) => (out += s));
  proc.stderr.setEncoding('utf8').on('data', (s) => (out += s));
  const deadline = Date.now() + 120_000;
  while (!out.includes('ollama serving')) {
    if (proc.exitCode !== null) throw new Error(`start-ollama exited: ${out}`);
    if (Date.now() > deadline) throw new Error(`start-ollama not ready in 120 s: ${out}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url: `http://127.0.0.1:${port}`,
    stop: async () => {
      try {
        process.kill(-proc.pid, 'SIGTERM');
      } catch {
        // Gone.
      }
      await new Promise((r) => (proc.exitCode !== null ? r() : proc.once('exit', r)));
      await rm(state, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Scripted answers, as the real APIs stream them

const sse = (events) => events.map(([event, data]) => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`).join('');
const ids = (prefix) => `${prefix}${randomBytes(12).toString('hex')}`;

/** An Anthropic Messages answer of `blocks` (thinking, text, tool_use), streamed. */
function anthropicAnswer(blocks, stopReason) {
  const events = [
    [
      'message_start',
      {
        type: 'message_start',
        message: {
          id: ids('msg_'),
          type: 'message',
          role: 'assistant',
          model: MODEL,
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: { input_tokens: 120, output_tokens: 1 },
        },
      },
    ],
  ];
  blocks.forEach((b, index) => {
    const start =
      b.type === 'thinking'
        ? { type: 'thinking', thinking: '', signature: '' }
        : b.type === 'text'
          ? { type: 'text', text: '' }
          : { type: 'tool_use', id: b.id, name: b.name, input: {} };
    events.push(['content_block_start', { type: 'content_block_start', index, content_block: start }]);
    const deltas =
      b.type === 'thinking'
        ? [
            { type: 'thinking_delta', thinking: b.thinking },
            { type: 'signature_delta', signature: b.signature },
          ]
        : b.type === 'text'
          ? [{ type: 'text_delta', text: b.text }]
          : [{ type: 'input_json_delta', partial_json: JSON.stringify(b.input) }];
    for (const delta of deltas) events.push(['content_block_delta', { type: 'content_block_delta', index, delta }]);
    events.push(['content_block_stop', { type: 'content_block_stop', index }]);
  });
  events.push([
    'message_delta',
    { type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage: { output_tokens: 40 } },
  ]);
  events.push(['message_stop', { type: 'message_stop' }]);
  return { status: 200, headers: { 'content-type': 'text/event-stream' }, body: sse(events) };
}

/** A Responses API answer of `items` (reasoning, function_call, web_search_call, message): streamed or whole, as asked. */
function responsesAnswer(request, items) {
  const created = Math.floor(Date.now() / 1000);
  const response = (status, output) => ({
    id: ids('resp_'),
    object: 'response',
    created_at: created,
    status,
    model: MODEL,
    output,
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: [],
    store: false,
    usage:
      status === 'completed'
        ? {
            input_tokens: 120,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: 40,
            output_tokens_details: { reasoning_tokens: 10 },
            total_tokens: 160,
          }
        : null,
  });
  if (request.stream !== true)
    return {
      status: 200,
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(response('completed', items)),
    };
  let seq = 0;
  const events = [];
  const push = (type, data) => events.push([type, { type, sequence_number: seq++, ...data }]);
  const base = response('in_progress', []);
  push('response.created', { response: base });
  push('response.in_progress', { response: base });
  items.forEach((item, output_index) => {
    const open =
      item.type === 'function_call'
        ? { ...item, arguments: '', status: 'in_progress' }
        : item.type === 'message'
          ? { ...item, content: [], status: 'in_progress' }
          : item.type === 'reasoning'
            ? { ...item, summary: [] }
            : { ...item, status: 'in_progress' };
    push('response.output_item.added', { output_index, item: open });
    if (item.type === 'function_call') {
      push('response.function_call_arguments.delta', { output_index, item_id: item.id, delta: item.arguments });
      push('response.function_call_arguments.done', { output_index, item_id: item.id, arguments: item.arguments });
    } else if (item.type === 'reasoning') {
      item.summary.forEach((part, summary_index) => {
        push('response.reasoning_summary_part.added', {
          output_index,
          item_id: item.id,
          summary_index,
          part: { type: 'summary_text', text: '' },
        });
        push('response.reasoning_summary_text.delta', {
          output_index,
          item_id: item.id,
          summary_index,
          delta: part.text,
        });
        push('response.reasoning_summary_text.done', {
          output_index,
          item_id: item.id,
          summary_index,
          text: part.text,
        });
        push('response.reasoning_summary_part.done', { output_index, item_id: item.id, summary_index, part });
      });
    } else if (item.type === 'message') {
      const part = item.content[0];
      push('response.content_part.added', {
        output_index,
        item_id: item.id,
        content_index: 0,
        part: { ...part, text: '' },
      });
      push('response.output_text.delta', { output_index, item_id: item.id, content_index: 0, delta: part.text });
      push('response.output_text.done', { output_index, item_id: item.id, content_index: 0, text: part.text });
      push('response.content_part.done', { output_index, item_id: item.id, content_index: 0, part });
    }
    push('response.output_item.done', { output_index, item });
  });
  push('response.completed', { response: response('completed', items) });
  return { status: 200, headers: { 'content-type': 'text/event-stream' }, body: sse(events) };
}

const reasoningItem = (text) => ({
  type: 'reasoning',
  id: ids('rs_'),
  summary: [{ type: 'summary_text', text }],
  // What OpenAI sends is opaque; Ollama puts the reasoning there in clear.
  encrypted_content: Buffer.from(text).toString('base64'),
});
const functionCall = (name, args, extra = {}) => ({
  type: 'function_call',
  id: ids('fc_'),
  call_id: ids('call_'),
  name,
  arguments: JSON.stringify(args),
  status: 'completed',
  ...extra,
});

// ---------------------------------------------------------------------------------------------
// The sessions

/** Answers queued for the next requests that `match`, in order; the rest go to Ollama. */
const queue = [];
const script = (x) => {
  const i = queue.findIndex((q) => q.match(x));
  if (i < 0) return null;
  const [q] = queue.splice(i, 1);
  return q.answer(JSON.parse(x.body));
};
const withTools = (x) => {
  try {
    return (JSON.parse(x.body).tools ?? []).length > 0;
  } catch {
    return false;
  }
};

/** What the sessions recorded, in order: `{ client, version, step, exchange }`. */
const kept = [];

async function step(rec, client, version, name, run) {
  const from = rec.exchanges.length;
  const result = await run();
  if (result !== undefined && (result.timedOut || result.code !== 0))
    throw new Error(
      `${client} ${name}: exit ${result.code}${result.timedOut ? ' (timed out)' : ''}\n${result.stdout}\n${result.stderr}`,
    );
  if (queue.length > 0) throw new Error(`${client} ${name}: ${queue.length} scripted answers not asked for`);
  await rec.until((xs) => xs.slice(from).every((x) => x.endedAt !== null), 60_000, 'every answer ended');
  const mine = rec.exchanges.slice(from);
  log(`${client} ${name}: ${mine.length} requests${result === undefined ? '' : ` (${result.ms} ms)`}`);
  for (const exchange of mine) kept.push({ client, version, step: name, exchange });
}

async function claudeSessions(rec, agents, outbound, root) {
  const version = agents.versions['@anthropic-ai/claude-code'];
  const home = join(root, 'claude');
  const work = join(home, 'work');
  await mkdir(work, { recursive: true });
  await writeFile(join(work, 'notes.txt'), 'Buy milk.\nTODO: call the plumber.\n');
  const env = claudeEnv({ home, baseUrl: rec.url, key: KEY, model: MODEL, outbound });
  const claude = (prompt, o = {}) =>
    runAgent(agents.claude, claudeArgs(prompt, { model: MODEL, ...o }), { env, cwd: work, timeoutMs: SESSION_MS });
  const thinking = (text) => ({ type: 'thinking', thinking: text, signature: randomBytes(48).toString('base64') });
  const tool = (name, input) => ({ type: 'tool_use', id: ids('toolu_'), name, input });
  const main = (blocks) => ({ match: withTools, answer: () => anthropicAnswer(blocks, 'tool_use') });

  queue.push(
    main([
      thinking('The user wants the notes and the listing.'),
      { type: 'text', text: 'Reading the notes and listing the folder.' },
      tool('Read', { file_path: join(work, 'notes.txt') }),
      tool('Bash', { command: 'ls', description: 'List the files' }),
    ]),
  );
  await step(rec, 'claude-code', version, 'turn1', () =>
    claude('Read notes.txt, then list the files here.', { allowedTools: ['Read', 'Bash(ls:*)'] }),
  );

  queue.push(
    main([
      thinking('Load a deferred tool, list a folder that is not there, and try to write a file.'),
      tool('ToolSearch', { query: 'select:WebFetch', max_results: 1 }),
      tool('Bash', { command: 'ls missing', description: 'List a missing folder' }),
      tool('Write', { file_path: join(work, 'out.txt'), content: 'done\n' }),
    ]),
  );
  await step(rec, 'claude-code', version, 'continue1', () =>
    claude('Load the WebFetch tool, list the folder missing and write done to out.txt.', {
      continueSession: true,
      allowedTools: ['Read', 'Bash(ls:*)'],
    }),
  );

  queue.push(
    main([
      tool('Agent', {
        description: 'Summarise the notes',
        prompt: 'Read notes.txt in the working folder and summarise it in one line.',
        subagent_type: 'general-purpose',
      }),
    ]),
  );
  await step(rec, 'claude-code', version, 'continue2', () =>
    claude('Ask a subagent to summarise notes.txt.', { continueSession: true, allowedTools: ['Read'] }),
  );

  await step(rec, 'claude-code', version, 'continue3', () => claude('Thanks.', { continueSession: true }));

  // The key as a bearer token (ANTHROPIC_AUTH_TOKEN): the same session, the same kind of body.
  const bearer = claudeEnv({ home, baseUrl: rec.url, key: KEY, auth: 'bearer', model: MODEL, outbound });
  queue.push(main([tool('Read', { file_path: join(work, 'plan.md') })]));
  await step(rec, 'claude-code', version, 'continue4', () =>
    runAgent(
      agents.claude,
      claudeArgs('Read plan.md.', { model: MODEL, continueSession: true, allowedTools: ['Read'] }),
      { env: bearer, cwd: work, timeoutMs: SESSION_MS },
    ),
  );
}

async function codexSessions(rec, agents, outbound, root) {
  const version = agents.versions['@openai/codex'];
  const home = join(root, 'codex');
  const work = join(home, 'work');
  await mkdir(work, { recursive: true });
  await writeFile(join(work, 'notes.txt'), 'Buy milk.\nTODO: call the plumber.\n');
  await writeCodexHome(home, { baseUrl: rec.url, model: MODEL });
  const env = codexEnv({ home, key: KEY, outbound });
  const codex = (prompt, o = {}) =>
    runAgent(process.execPath, codexArgs(agents.codexJs, prompt, { work, ...o }), {
      env,
      cwd: work,
      timeoutMs: SESSION_MS,
    });
  const main = (items) => ({ match: withTools, answer: (body) => responsesAnswer(body, items) });

  queue.push(main([reasoningItem('Read the notes with cat.'), functionCall('exec_command', { cmd: 'cat notes.txt' })]));
  await step(rec, 'codex', version, 'exec', () => codex('Show what notes.txt says.'));

  queue.push(
    main([
      reasoningItem('Set the goal and check the agents.'),
      functionCall('create_goal', { objective: 'Call the plumber' }),
      functionCall('wait_agent', { targets: ['helper'], timeout_ms: 1000 }, { namespace: 'multi_agent_v1' }),
    ]),
  );
  await step(rec, 'codex', version, 'resume1', () =>
    codex('Set the goal to calling the plumber, then wait for the helper agent.', { resume: true }),
  );

  queue.push(
    main([
      {
        type: 'web_search_call',
        id: ids('ws_'),
        status: 'completed',
        action: { type: 'search', query: 'plumber opening hours' },
      },
      functionCall('get_goal', {}),
    ]),
  );
  await step(rec, 'codex', version, 'resume2', () =>
    codex('Search the web for plumber opening hours, then show the goal.', { resume: true }),
  );

  queue.push(
    main([
      reasoningItem('List a missing folder, then close the goal.'),
      functionCall('exec_command', { cmd: 'ls missing' }),
      functionCall('update_goal', { status: 'complete' }),
    ]),
  );
  await step(rec, 'codex', version, 'resume3', () =>
    codex('List the folder missing, then mark the goal complete.', { resume: true }),
  );

  await step(rec, 'codex', version, 'resume4', () => codex('Thanks.', { resume: true }));
  await step(rec, 'codex', version, 'resume5', () => codex('Bye.', { resume: true }));
}

async function openaiAgentsSessions(rec) {
  const version = JSON.parse(readFileSync(join(REPO, 'node_modules/@openai/agents/package.json'), 'utf8')).version;
  const { default: OpenAI } = await import('openai');
  const { z } = await import('zod');
  const { Agent, run, setDefaultOpenAIClient, setOpenAIAPI, setTracingDisabled, tool } = await import('@openai/agents');
  setDefaultOpenAIClient(new OpenAI({ baseURL: `${rec.url}/v1`, apiKey: KEY, maxRetries: 0 }));
  setOpenAIAPI('responses');
  setTracingDisabled(true);
  const weather = tool({
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => `Sunny in ${city}, 21 °C`,
  });
  const agent = new Agent({
    name: 'helper',
    instructions: 'You answer questions about the weather.',
    model: MODEL,
    tools: [weather],
  });
  const call = () => ({
    match: withTools,
    answer: (body) =>
      responsesAnswer(body, [reasoningItem('Ask the tool.'), functionCall('get_weather', { city: 'Paris' })]),
  });
  queue.push(call());
  await step(rec, 'openai-agents', version, 'run', async () => {
    await run(agent, 'What is the weather in Paris?');
  });
  queue.push(call());
  await step(rec, 'openai-agents', version, 'run-streamed', async () => {
    const stream = await run(agent, 'And the weather in Paris now?', { stream: true });
    for await (const _ of stream);
    await stream.completed;
  });
}

async function aiSdkSessions(rec) {
  const version = JSON.parse(readFileSync(join(REPO, 'node_modules/ai/package.json'), 'utf8')).version;
  const { generateText, streamText, stepCountIs, tool } = await import('ai');
  const { createOpenAI } = await import('@ai-sdk/openai');
  const { z } = await import('zod');
  const openai = createOpenAI({ baseURL: `${rec.url}/v1`, apiKey: KEY });
  const tools = {
    get_weather: tool({
      description: 'The weather in a city',
      inputSchema: z.object({ city: z.string() }),
      execute: async ({ city }) => `Sunny in ${city}, 21 °C`,
    }),
  };
  const options = {
    model: openai(MODEL),
    system: 'You answer questions about the weather.',
    tools,
    stopWhen: stepCountIs(3),
    providerOptions: { openai: { store: false } },
  };
  const call = () => ({
    match: withTools,
    answer: (body) =>
      responsesAnswer(body, [reasoningItem('Ask the tool.'), functionCall('get_weather', { city: 'Paris' })]),
  });
  queue.push(call());
  await step(rec, 'ai-sdk', version, 'generate', async () => {
    await generateText({ ...options, prompt: 'What is the weather in Paris?' });
  });
  queue.push(call());
  await step(rec, 'ai-sdk', version, 'stream', async () => {
    const r = streamText({ ...options, prompt: 'And the weather in Paris now?' });
    for await (const _ of r.textStream);
    await r.response;
  });
}

// ---------------------------------------------------------------------------------------------
// The fixtures

/** What a request carries last: the new turn that made it. */
function what(path, body) {
  if (path.startsWith('/v1/messages')) {
    const last = body.messages?.at(-1);
    const blocks = Array.isArray(last?.content) ? last.content.map((b) => b.type) : ['text'];
    const kind = blocks.includes('tool_result') ? 'tool-results' : 'prompt';
    return (body.tools ?? []).length === 0 ? `${kind}-no-tools` : kind;
  }
  if (path.startsWith('/v1/responses')) {
    const input = Array.isArray(body.input) ? body.input : [{ type: 'message' }];
    const type = input.at(-1).type ?? 'message';
    return type === 'function_call_output' ? 'tool-output' : type === 'message' ? 'prompt' : type;
  }
  return 'request';
}

function fixture({ client, version, step: name, exchange: x }) {
  const headers = {};
  for (const h of KEPT_HEADERS) if (x.headers[h] !== undefined) headers[h] = x.headers[h];
  const body = JSON.parse(x.body);
  return {
    name: `${name}-${what(x.path, body)}`,
    value: {
      client,
      version,
      step: name,
      answeredBy: x.scripted ? 'the capture script (a scripted tool call)' : `ollama (${x.status})`,
      method: x.method,
      path: x.path,
      headers,
      body,
    },
  };
}

async function writeFixtures() {
  const byClient = new Map();
  for (const k of kept) {
    if (k.exchange.method !== 'POST') continue;
    const list = byClient.get(k.client) ?? [];
    list.push(k);
    byClient.set(k.client, list);
  }
  const written = [];
  for (const [client, list] of byClient) {
    const folder = join(OUT, `${client}@${list[0].version}`);
    await rm(folder, { recursive: true, force: true });
    await mkdir(folder, { recursive: true });
    for (const [i, k] of list.entries()) {
      const { name, value } = fixture(k);
      const text = `${JSON.stringify(value, null, 2)}\n`;
      if (text.includes(KEY) || /ob_sk_|"x-api-key"|"authorization"/i.test(text))
        throw new Error(`${client} ${name}: a secret would be written`);
      if (value.body.model !== MODEL) throw new Error(`${client} ${name}: model ${value.body.model}, not ${MODEL}`);
      const file = join(folder, `${String(i + 1).padStart(2, '0')}-${name}.json`);
      await writeFile(file, text);
      written.push({ file, bytes: text.length });
    }
  }
  return written;
}

// ---------------------------------------------------------------------------------------------

const realup = realupDir();
const agents = only.some((c) => c === 'claude-code' || c === 'codex') ? await installAgents() : null;
const ollama = await startOllama(realup);
const root = await mkdtemp(join(tmpdir(), 'capture-agents-'));
const rec = await startRecorder(ollama.url, { script });
const outbound = await startOutboundCatcher();
try {
  await makeAnsweringModel(ollama.url, { model: MODEL, gguf: join(realup, 'tiny.gguf') });
  if (only.includes('claude-code')) await claudeSessions(rec, agents, outbound.url, root);
  if (only.includes('codex')) await codexSessions(rec, agents, outbound.url, root);
  if (only.includes('openai-agents')) await openaiAgentsSessions(rec);
  if (only.includes('ai-sdk')) await aiSdkSessions(rec);
  if (outbound.hits.length > 0) throw new Error(`traffic past 127.0.0.1: ${outbound.hits.join(', ')}`);
  const other = kept.filter((k) => k.exchange.method !== 'POST');
  if (other.length > 0) log(`not kept: ${other.map((k) => `${k.exchange.method} ${k.exchange.path}`).join(', ')}`);
  const written = await writeFixtures();
  for (const w of written) log(`${w.file.slice(REPO.length + 1)} ${w.bytes} bytes`);
  // Formatted as the tree is (npm run format:check reads the fixtures too).
  await new Promise((done, fail) =>
    spawn('npx', ['prettier', '--write', '--log-level', 'warn', ...written.map((w) => w.file)], {
      cwd: REPO,
      stdio: 'inherit',
    }).once('exit', (code) => (code === 0 ? done() : fail(new Error(`prettier exited ${code}`)))),
  );
  log(`${written.length} fixtures in ${OUT.slice(REPO.length + 1)}; files there: ${(await readdir(OUT)).join(', ')}`);
} finally {
  await rec.close();
  await outbound.close();
  await ollama.stop();
  await rm(root, { recursive: true, force: true });
}
