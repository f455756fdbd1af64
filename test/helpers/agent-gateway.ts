/**
 * `ob-proxy serve` in front of the simulated model servers an agent test talks to, one instance
 * each: Ollama ≥ 0.32.6 (`ollama`), a thinking model (`thinking`), vLLM's wire (`vllm`) and an
 * older Ollama's stream (`old`); with each instance's default key and an openai SDK client on it.
 */
import OpenAI from 'openai';
import {
  type ServeProcess,
  type SimProcess,
  type SimRequest,
  cliJson,
  startServe,
  startSimulate,
  tmpHome,
} from './processes.js';

export const GEMMA = 'gemma4:26b';
export const QWEN = 'qwen3.6:27b';

export type ModelServer = 'ollama' | 'thinking' | 'vllm' | 'old';

const SIMULATED: Record<ModelServer, { model: string; args: string[] }> = {
  ollama: { model: GEMMA, args: [] },
  thinking: { model: QWEN, args: ['--reasoning'] },
  vllm: { model: GEMMA, args: ['--flavor', 'vllm'] },
  old: { model: QWEN, args: ['--flavor', 'ollama-old', '--reasoning'] },
};

export interface AgentGateway {
  serve: ServeProcess;
  /** The model servers started, by instance id. */
  sims: Record<ModelServer, SimProcess>;
  /** Each instance's default key. */
  keys: Record<ModelServer, string>;
  /** The openai SDK on an instance's default key, without retries. */
  sdk(which: ModelServer): OpenAI;
  stop(): Promise<void>;
}

/** Starts the daemon and the named model servers together, then adds and readies an instance for each. */
export async function startAgentGateway(servers: ModelServer[]): Promise<AgentGateway> {
  const home = await tmpHome();
  const sims = {} as Record<ModelServer, SimProcess>;
  const keys = {} as Record<ModelServer, string>;
  const [serve, ...started] = await Promise.all([
    startServe(home),
    ...servers.map((s) => startSimulate([SIMULATED[s].model], SIMULATED[s].args)),
  ]);
  servers.forEach((s, i) => (sims[s] = started[i]!));
  for (const name of servers) {
    await cliJson(['instances', 'add', name, '--model', SIMULATED[name].model, '--endpoint', sims[name].url], home);
    keys[name] = (
      await cliJson<{ defaultKey: { secret: string } }>(['instances', 'ready', name], home)
    ).defaultKey.secret;
  }
  return {
    serve,
    sims,
    keys,
    sdk: (which) => new OpenAI({ baseURL: `${serve.baseUrl}/v1`, apiKey: keys[which], maxRetries: 0 }),
    stop: async () => {
      await Promise.all([serve.stop(), ...Object.values(sims).map((s) => s.stop())]);
    },
  };
}

/** The last chat completion a model server received. */
export const lastChat = async (sim: SimProcess): Promise<SimRequest> =>
  (await sim.requests()).filter((r) => r.path === '/v1/chat/completions').at(-1)!;
