/* global fetch, process, setTimeout, clearTimeout */
/**
 * How the tests and the capture script run the coding agents against a model server: each agent
 * with a home and a config folder of its own, every request naming the instance's model, nothing
 * sent anywhere but 127.0.0.1, and the model server's model made to answer in a bounded time.
 * Plain JavaScript (typed by agent-sessions.d.mts) so that the capture script
 * (scripts/capture-agent-bodies.mjs), which is not compiled, shares it with the tests.
 *
 * Claude Code 2.1.328 picks a model per task (the main loop, its small fast model for titles and
 * summaries, subagents, the permission classifier); each has a setting, and all are set to the
 * instance's model here (`claudeEnv`), so that every request names it. Codex 0.171 names
 * `model` from config.toml in every request (`writeCodexHome`).
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFile, writeFile, mkdir } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Claude Code's settings for a gateway or a model server at `baseUrl` (its root: Claude Code adds
 * `/v1/messages`). `auth: 'x-api-key'` sends the key as Anthropic's clients do
 * (ANTHROPIC_API_KEY), `'bearer'` as `Authorization: Bearer` (ANTHROPIC_AUTH_TOKEN).
 * `outbound` is an HTTP proxy that refuses everything (agent-recorder.mjs): what is not for
 * 127.0.0.1 goes there and is counted, never out.
 */
export function claudeEnv({ home, baseUrl, key, auth = 'x-api-key', model, outbound }) {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    CLAUDE_CONFIG_DIR: join(home, '.claude'),
    TMPDIR: process.env.TMPDIR ?? '/tmp',
    LANG: 'C.UTF-8',
    ANTHROPIC_BASE_URL: baseUrl,
    ...(auth === 'bearer' ? { ANTHROPIC_AUTH_TOKEN: key } : { ANTHROPIC_API_KEY: key }),
    // Every task's model: the main loop (also --model), the aliases a task or subagent may name
    // (haiku for the small fast tasks and the Explore agent, sonnet, opus, fable), the small fast
    // model's older name, subagents, workflows, auto mode and the background classifier.
    ANTHROPIC_MODEL: model,
    ANTHROPIC_DEFAULT_MODEL: model,
    ANTHROPIC_DEFAULT_HAIKU_MODEL: model,
    ANTHROPIC_DEFAULT_SONNET_MODEL: model,
    ANTHROPIC_DEFAULT_OPUS_MODEL: model,
    ANTHROPIC_DEFAULT_FABLE_MODEL: model,
    ANTHROPIC_SMALL_FAST_MODEL: model,
    CLAUDE_CODE_SUBAGENT_MODEL: model,
    CLAUDE_CODE_WORKFLOW_SUBAGENT_MODEL: model,
    CLAUDE_CODE_AUTO_MODE_MODEL: model,
    CLAUDE_CODE_BG_CLASSIFIER_MODEL: model,
    // The model's context (the servers here serve 131,072 tokens); unset, Claude Code warns that
    // it does not know the model and assumes a million.
    CLAUDE_CODE_MAX_CONTEXT_TOKENS: '131072',
    // Nothing but the model server: no telemetry, error reports, update checks or other traffic.
    DISABLE_TELEMETRY: '1',
    DISABLE_ERROR_REPORTING: '1',
    DISABLE_AUTOUPDATER: '1',
    DISABLE_UPDATES: '1',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    ...proxyEnv(outbound),
    NO_COLOR: '1',
  };
}

function proxyEnv(outbound) {
  if (outbound === undefined) return {};
  return {
    HTTP_PROXY: outbound,
    HTTPS_PROXY: outbound,
    http_proxy: outbound,
    https_proxy: outbound,
    NO_PROXY: '127.0.0.1,localhost',
    no_proxy: '127.0.0.1,localhost',
  };
}

/** `claude -p PROMPT` on `model`; `continue` resumes the folder's last session (`--continue`). */
export function claudeArgs(prompt, { model, continueSession = false, allowedTools = [] }) {
  return [
    '-p',
    '--model',
    model,
    '--output-format',
    'json',
    ...(continueSession ? ['--continue'] : []),
    ...(allowedTools.length > 0 ? ['--allowedTools', allowedTools.join(',')] : []),
    '--',
    prompt,
  ];
}

/**
 * Codex's home for a model provider at `baseUrl` (the README's snippet: `wire_api =
 * "responses"`, the key in the variable `env_key` names, OB_PROXY_KEY), with what would reach
 * past 127.0.0.1 off: the update check, analytics, feedback, plugins and apps (their catalogs
 * are fetched from github.com and chatgpt.com). Codex's own retries are left as they are: how it
 * meets a refusal is part of what the tests see.
 */
export async function writeCodexHome(home, { baseUrl, model }) {
  const codexHome = join(home, '.codex');
  await mkdir(codexHome, { recursive: true });
  await writeFile(
    join(codexHome, 'config.toml'),
    `model = "${model}"
model_provider = "ob-proxy"
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[features]
plugins = false
apps = false

[model_providers.ob-proxy]
name = "ob-proxy"
base_url = "${baseUrl}/v1"
env_key = "OB_PROXY_KEY"
wire_api = "responses"
`,
  );
  return codexHome;
}

export function codexEnv({ home, key, outbound }) {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: home,
    CODEX_HOME: join(home, '.codex'),
    TMPDIR: process.env.TMPDIR ?? '/tmp',
    LANG: 'C.UTF-8',
    OB_PROXY_KEY: key,
    ...proxyEnv(outbound),
    NO_COLOR: '1',
  };
}

/**
 * `codex exec PROMPT` in `work`, or `codex exec resume --last PROMPT` (the folder's last session);
 * `json` prints its events as JSON lines (`thread.started` with the session's id, `turn.completed`).
 */
export function codexArgs(codexJs, prompt, { work, resume = false, json = false }) {
  // `exec`'s own options go before `resume`; resume --last picks the newest session of the cwd.
  const common = [codexJs, 'exec', '--skip-git-repo-check', '--color', 'never', ...(json ? ['--json'] : [])];
  return resume
    ? [...common, '--sandbox', 'read-only', 'resume', '--last', '--', prompt]
    : [...common, '--sandbox', 'read-only', '-C', work, '--', prompt];
}

/**
 * Runs an agent to its end in a process group of its own; past `timeoutMs` the group is killed
 * and the result says so. Resolves `{ code, signal, stdout, stderr, ms, timedOut }`.
 */
export function runAgent(file, args, { env, cwd, timeoutMs }) {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env, cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    child.stdout.setEncoding('utf8').on('data', (s) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s) => (stderr += s));
    const kill = () => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, timeoutMs);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      // Whatever the agent left running in its group (a shell it started).
      kill();
      resolve({ code, signal, stdout, stderr, ms: Date.now() - started, timedOut });
    });
  });
}

/**
 * The model the agents talk to, made to answer in a bounded time and the same way every time:
 * `gemma4:26b` made again on the server from the same weights and chat template (so its wire is
 * unchanged) with two default options, which a request may still override:
 * - `seed`: sampling is seeded, so one body always gets one answer (the corpus compares the
 *   answers straight and through the gateway). The agents send no seed of their own.
 * - `stop: ["<tool_call>"]`: the random-weight model ends its answer where it would begin a tool
 *   call. Unstopped it calls the agents' tools with random arguments (a Bash command of random
 *   text, an Edit of a random path) in answers of a thousand tokens and more (44 s each on one
 *   core at Claude Code's 27k-token prompt), and a call cut by max_tokens ends Ollama's stream
 *   without its last events. Stopped, it answers a few words of text.
 */
export async function makeAnsweringModel(serverUrl, { model, gguf, seed = 7 }) {
  const bytes = await readFile(gguf);
  const digest = `sha256:${createHash('sha256').update(bytes).digest('hex')}`;
  const blob = await fetch(`${serverUrl}/api/blobs/${digest}`, { method: 'HEAD' });
  if (blob.status !== 200) {
    const put = await fetch(`${serverUrl}/api/blobs/${digest}`, { method: 'POST', body: bytes });
    if (put.status !== 201 && put.status !== 200) throw new Error(`blob upload: ${put.status} ${await put.text()}`);
  }
  const res = await fetch(`${serverUrl}/api/create`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      model,
      files: { [gguf.split('/').at(-1)]: digest },
      parameters: { seed, stop: ['<tool_call>'] },
      stream: false,
    }),
  });
  const text = await res.text();
  if (res.status !== 200 || !text.includes('success')) throw new Error(`create ${model}: ${res.status} ${text}`);
}
