/**
 * Real coding agents against real model servers (test/conformance/agents.test.ts and
 * agent-corpus.test.ts): the agents at their pinned versions (agents-install.mjs), how each is
 * configured and run (agent-sessions.mjs), the recorder that stands in front of a server
 * (agent-recorder.mjs), and the corpus of bodies they sent (test/fixtures/agent-bodies/, made by
 * scripts/capture-agent-bodies.mjs). The .mjs files are plain JavaScript so that the capture
 * script shares them; this file gives the tests their types and what only the tests need.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Exchange, ROUTES, type RouteSpec, parseEvents } from './wire-exchange.js';

export { type InstalledAgents, installAgents } from './agents-install.mjs';
export { type OutboundCatcher, type Recorder, startOutboundCatcher, startRecorder } from './agent-recorder.mjs';
export {
  type AgentRun,
  claudeArgs,
  claudeEnv,
  codexArgs,
  codexEnv,
  makeAnsweringModel,
  runAgent,
  writeCodexHome,
} from './agent-sessions.mjs';

export const FIXTURES_DIR = resolve(import.meta.dirname, '../fixtures/agent-bodies');

/** One request an agent sent, as scripts/capture-agent-bodies.mjs kept it. */
export interface AgentFixture {
  /** `<client>@<version>/NN-<step>-<what>.json` */
  readonly file: string;
  readonly client: string;
  readonly version: string;
  readonly step: string;
  readonly answeredBy: string;
  readonly method: string;
  /** With its query string (`/v1/messages?beta=true`). */
  readonly path: string;
  /** content-type, and anthropic-version and anthropic-beta where the agent sent them. */
  readonly headers: Record<string, string>;
  readonly body: Record<string, unknown>;
}

/** Every fixture, by client folder then number. */
export function agentFixtures(): AgentFixture[] {
  const out: AgentFixture[] = [];
  for (const folder of readdirSync(FIXTURES_DIR).sort()) {
    for (const name of readdirSync(join(FIXTURES_DIR, folder)).sort()) {
      if (!name.endsWith('.json')) continue;
      const value = JSON.parse(readFileSync(join(FIXTURES_DIR, folder, name), 'utf8')) as Omit<AgentFixture, 'file'>;
      out.push({ file: `${folder}/${name}`, ...value });
    }
  }
  return out;
}

/** The route a fixture's path is on (its query string aside). */
export function routeOf(path: string): RouteSpec {
  const bare = path.split('?')[0];
  const route = Object.values(ROUTES).find((r) => r.path === bare);
  if (route === undefined) throw new Error(`no route for ${path}`);
  return route;
}

/**
 * Sends a fixture as its agent sent it (method, path and query, headers, body) to `baseUrl`, with
 * `key` the way its agent sends one: `x-api-key` on Messages (Claude Code's ANTHROPIC_API_KEY),
 * `Authorization: Bearer` elsewhere. Reads the answer whole, a stream to its end.
 */
export async function sendFixture(baseUrl: string, f: AgentFixture, key: string | null): Promise<Exchange> {
  const auth: Record<string, string> =
    key === null ? {} : f.path.startsWith('/v1/messages') ? { 'x-api-key': key } : { authorization: `Bearer ${key}` };
  const res = await fetch(`${baseUrl}${f.path}`, {
    method: f.method,
    headers: { ...f.headers, ...auth },
    body: JSON.stringify(f.body),
  });
  const text = await res.text();
  const contentType = res.headers.get('content-type') ?? '';
  const isStream = contentType.startsWith('text/event-stream');
  let json: unknown = null;
  if (!isStream) {
    try {
      json = JSON.parse(text);
    } catch {
      json = null;
    }
  }
  return { status: res.status, contentType, json, events: isStream ? parseEvents(text) : [], text };
}
