/** Types of agent-sessions.mjs. */
export type AgentEnv = Record<string, string>;

export function claudeEnv(o: {
  home: string;
  baseUrl: string;
  key: string;
  auth?: 'x-api-key' | 'bearer';
  model: string;
  outbound?: string;
}): AgentEnv;

export function claudeArgs(
  prompt: string,
  o: { model: string; continueSession?: boolean; allowedTools?: string[] },
): string[];

/** Writes `<home>/.codex/config.toml`; returns the .codex folder. */
export function writeCodexHome(home: string, o: { baseUrl: string; model: string }): Promise<string>;

export function codexEnv(o: { home: string; key: string; outbound?: string }): AgentEnv;

/** Node's arguments: the launcher, then `exec …` or `exec … resume --last …`. */
export function codexArgs(
  codexJs: string,
  prompt: string,
  o: { work: string; resume?: boolean; json?: boolean },
): string[];

export interface AgentRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
  timedOut: boolean;
}

export function runAgent(
  file: string,
  args: string[],
  o: { env: AgentEnv; cwd: string; timeoutMs: number },
): Promise<AgentRun>;

export function makeAnsweringModel(serverUrl: string, o: { model: string; gguf: string; seed?: number }): Promise<void>;
