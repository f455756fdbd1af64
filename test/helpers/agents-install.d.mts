/** Types of agents-install.mjs. */
export declare const AGENT_VERSIONS: Readonly<{ '@anthropic-ai/claude-code': string; '@openai/codex': string }>;

/** node_modules/.cache/ob-proxy/agents: where the installs live. */
export declare const AGENTS_ROOT: string;

export interface InstalledAgents {
  /** The install's folder (its package.json and node_modules). */
  readonly dir: string;
  /** Claude Code's native binary (its platform package's `claude`). */
  readonly claude: string;
  /** Codex's npm launcher, run with Node: `node <codexJs> exec …`. */
  readonly codexJs: string;
  readonly versions: typeof AGENT_VERSIONS;
}

/** The pinned agents, installed if they are not yet; idempotent, safe from several processes at once. */
export declare function installAgents(): Promise<InstalledAgents>;
