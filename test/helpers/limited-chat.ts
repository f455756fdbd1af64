/**
 * A chat completion asked with a key of a real `ob-proxy serve`, and what the limits' refusals
 * look like: the answer read whole, the chat requests the model server received, the 429's
 * OpenAI envelope, and a key as `keys create --json` prints it.
 */
import type { SimProcess, SimRequest } from './processes.js';
import { MODEL } from './store-home.js';

/** What the model server received for chat completions (the daemon's health probes ask it for its models too). */
export async function chatsOf(sim: SimProcess): Promise<SimRequest[]> {
  return (await sim.requests()).filter((r) => r.path === '/v1/chat/completions');
}

export interface Answer {
  status: number;
  headers: Headers;
  json: unknown;
}

export async function ask(baseUrl: string, key: string, content: string, signal?: AbortSignal): Promise<Answer> {
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content }] }),
    ...(signal === undefined ? {} : { signal }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: JSON.parse(text) as unknown };
}

export const rateLimited = (message: string) => ({
  error: { message, type: 'rate_limit_error', param: null, code: 'rate_limited' },
});

export interface KeyJson {
  id: string;
  secret: string;
  limits: { rpm: number | null; tpm: number | null; concurrency: number | null };
}
