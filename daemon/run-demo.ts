import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isSea } from 'node:sea';
import type { Config } from '../src/config.js';
import { DEFAULT_MODELS } from '../src/domain/model-id.js';
import { startDaemon, type DaemonDeps } from './build-daemon.js';
import { buildSimulator, type Simulator } from '../simulator/simulator.js';

export interface DemoRun {
  baseUrl: string;
  keys: { instance: string; model: string; secret: string }[];
  stop(): Promise<void>;
}

/** Daemon + one simulated instance per model id, made ready, each with a working key. */
export async function startDemo(config: Config, deps: DaemonDeps): Promise<DemoRun> {
  const sims: Simulator[] = [];
  const daemon = await startDaemon(config, deps);
  const lc = daemon.ctx.lifecycle;
  const keys: DemoRun['keys'] = [];
  try {
    for (const model of DEFAULT_MODELS.filter((m) => config.models.includes(m))) {
      const sim = buildSimulator({ models: [model], chunks: 12, tokensPerSecond: 40 });
      sims.push(sim);
      const endpoint = await sim.listen(0);
      const id = `demo-${model.split(':')[0]!.replace(/[^A-Za-z0-9]/g, '')}`;
      const existing = lc.registry.instances.get(id);
      if (existing?.state === 'ready') {
        await lc.pending(id);
      } else if (existing !== undefined && existing.state !== 'pending') {
        await lc.remove(id);
      }
      if (lc.registry.instances.get(id) === undefined) await lc.addInstance({ id, model, endpoint });
      const { defaultKey } = await lc.ready(id, { endpoint });
      const key = await defaultKey;
      const claimed = key === null ? null : lc.claimSecret(key.id);
      const secret = claimed ?? (await lc.createKey(id, `demo-${Date.now()}`)).secret;
      keys.push({ instance: id, model, secret });
    }
  } catch (err) {
    await daemon.shutdown(0);
    await Promise.all(sims.map((s) => s.close()));
    throw err;
  }
  return {
    baseUrl: daemon.ctx.baseUrl,
    keys,
    async stop() {
      await daemon.shutdown(2_000);
      await Promise.all(sims.map((s) => s.close()));
    },
  };
}

/**
 * How to run the CLI again: from the single binary (which may not be on PATH, on a machine
 * where npx does not exist) its own path; from the npm package, npx.
 */
function cliCommand(): string {
  if (!isSea()) return 'npx ob-proxy';
  const path = process.execPath;
  return /^[\w./-]+$/.test(path) ? path : `'${path.replaceAll("'", "'\\''")}'`;
}

export function demoText(run: DemoRun, config: Config, cli = cliCommand()): string {
  const first = run.keys[0];
  if (first === undefined) return 'No demo instances (OB_PROXY_MODELS names no known model).\n';
  const body = JSON.stringify({ model: first.model, messages: [{ role: 'user', content: 'Say hello' }] });
  return [
    `ob-proxy demo is serving at ${run.baseUrl}  (home ${config.home})`,
    '',
    ...run.keys.map((k) => `  ${k.instance}  ${k.model.padEnd(12)}  key ${k.secret}`),
    '',
    "Keys are shown once; these are for this demo. Put the first in your shell's environment:",
    '',
    `export OB_KEY=${first.secret}`,
    '',
    // A secret in a command line is seen by every user through `ps` and kept in shell history;
    // the header goes to curl on stdin, from printf, which the shell runs without a process.
    'Then call it (curl reads the key header from stdin, so the key is in no command line):',
    '',
    `printf 'Authorization: Bearer %s\\n' "$OB_KEY" | curl -s ${run.baseUrl}/v1/chat/completions -H @- -H "Content-Type: application/json" -d '${body}'`,
    '',
    'Or with the openai SDK (npm i openai), in an .mjs file run where OB_KEY is set:',
    '',
    `  import OpenAI from 'openai';`,
    `  const client = new OpenAI({ baseURL: '${run.baseUrl}/v1', apiKey: process.env.OB_KEY });`,
    `  const r = await client.chat.completions.create({ model: '${first.model}', messages: [{ role: 'user', content: 'Say hello' }] });`,
    `  console.log(r.choices[0].message.content);`,
    '',
    `Manage it from another terminal: ${cli} instances list --home ${config.home}   (or: ${cli} console --home ${config.home})`,
    'Press Ctrl-C to stop.',
    '',
  ].join('\n');
}

export async function runDemo(config: Config, deps: DaemonDeps, print: (s: string) => void): Promise<void> {
  const run = await startDemo(config, deps);
  print(demoText(run, config));
  await new Promise<void>((resolve) => {
    const stop = (): void => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      run.stop().then(resolve, resolve);
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
}

export async function demoHome(given: string | undefined): Promise<string> {
  return given ?? (await mkdtemp(join(tmpdir(), 'ob-demo-')));
}
