/**
 * The load generator shared by the short load suite (`npm run test:e2e`) and the soak (`npm run soak`):
 * mixed plain and streaming requests at a fixed concurrency through the proxy to simulated
 * instances, each answer checked token by token (the simulator numbers them "t0 t1 …").
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { Pool } from 'undici';
import type { Simulator } from '../../simulator/simulator.js';
import { MODEL, expectedTokens } from './harness.js';

/** A full collection, so "memory after" is what is still referenced, not garbage not yet swept. */
export const collectGarbage: () => void = (() => {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
})();

export interface Memory {
  heapUsedMb: number;
  rssMb: number;
}

export function memory(): Memory {
  collectGarbage();
  collectGarbage();
  const m = process.memoryUsage();
  return { heapUsedMb: Math.round(m.heapUsed / 1e5) / 10, rssMb: Math.round(m.rss / 1e5) / 10 };
}

export interface LoadResult {
  requests: number;
  streaming: number;
  concurrency: number;
  errors: number;
  chunksExpected: number;
  chunksLost: number;
  reordered: number;
  firstErrors: string[];
  ms: number;
}

export interface LoadOptions {
  baseUrl: string;
  keys: string[];
  total: number;
  concurrency: number;
  /** 0..1: share of requests that stream. */
  streamShare: number;
  chunks: number;
}

/** Checks one answer; returns a description of what is wrong, or null. */
function check(stream: boolean, status: number, text: string, chunks: number, result: LoadResult): string | null {
  if (status !== 200) return `HTTP ${status}: ${text.slice(0, 200)}`;
  const want = expectedTokens(chunks);
  let got: string[];
  if (stream) {
    if (!text.endsWith('data: [DONE]\n\n')) return `stream without [DONE]: ${text.slice(-200)}`;
    got = [];
    for (const frame of text.split('\n\n')) {
      if (!frame.startsWith('data: {')) continue;
      const c = (JSON.parse(frame.slice(6)) as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta
        ?.content;
      if (typeof c === 'string' && c !== '') got.push(c);
    }
  } else {
    const content =
      (JSON.parse(text) as { choices: { message: { content: string } }[] }).choices[0]?.message.content ?? '';
    got = content.split(/(?<= )/).filter((t) => t !== '');
  }
  result.chunksExpected += want.length;
  const missing = want.filter((t) => !got.includes(t)).length;
  result.chunksLost += missing;
  if (missing === 0 && got.join('') !== want.join('')) result.reordered++;
  return missing === 0 && got.length === want.length && got.join('') === want.join('')
    ? null
    : `tokens ${got.join('|').slice(0, 120)}`;
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const pool = new Pool(o.baseUrl, { connections: o.concurrency, keepAliveTimeout: 30_000 });
  const result: LoadResult = {
    requests: 0,
    streaming: 0,
    concurrency: o.concurrency,
    errors: 0,
    chunksExpected: 0,
    chunksLost: 0,
    reordered: 0,
    firstErrors: [],
    ms: 0,
  };
  const started = performance.now();
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < o.total) {
      const i = next++;
      const stream = (i * 7919) % 100 < o.streamShare * 100;
      const key = o.keys[i % o.keys.length] as string;
      let problem: string | null;
      try {
        const r = await pool.request({
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            model: MODEL,
            stream,
            messages: [{ role: 'user', content: `load ${i} [[sim chunks=${o.chunks}]]` }],
          }),
        });
        problem = check(stream, r.statusCode, await r.body.text(), o.chunks, result);
      } catch (err) {
        problem = `client error: ${(err as Error).message}`;
      }
      result.requests++;
      if (stream) result.streaming++;
      if (problem !== null) {
        result.errors++;
        if (result.firstErrors.length < 5) result.firstErrors.push(problem);
      }
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, worker));
  result.ms = Math.round(performance.now() - started);
  await pool.close();
  return result;
}

export interface HeldResult {
  streams: number;
  allOpenAtOnce: boolean;
  completed: number;
  errors: number;
  firstErrors: string[];
  ms: number;
}

/**
 * Opens `streams` streams at once and holds them open together, then checks each ended whole.
 * `peak` is how many were streaming at the same moment. The simulators are held (Simulator.hold)
 * after each stream's first chunk until every stream has either reached the client or ended
 * without doing so: all open at once by construction, however slowly a loaded machine opens them
 * (a pace alone raced the clock: 483 of 800 at once with the cores busy).
 */
export async function holdStreams(
  baseUrl: string,
  keys: string[],
  streams: number,
  tokensPerSecond: number,
  chunks: number,
  sims: readonly Simulator[],
): Promise<HeldResult & { peak: number }> {
  const pool = new Pool(baseUrl, { connections: streams });
  const releases = sims.map((s) => s.hold());
  // Streams that reached the client, and those that ended before they did: when the two add up to
  // all of them, nothing more can arrive while held, so the simulators let them all go on.
  let settled = 0;
  const settle = (): void => {
    if (++settled === streams) for (const release of releases) release();
  };
  let open = 0;
  let peak = 0;
  let completed = 0;
  let errors = 0;
  const firstErrors: string[] = [];
  const fail = (what: string): void => {
    errors++;
    if (firstErrors.length < 3) firstErrors.push(what);
  };
  const started = performance.now();
  await Promise.all(
    Array.from({ length: streams }, async (_, i) => {
      let counted = false;
      try {
        const r = await pool.request({
          method: 'POST',
          path: '/v1/chat/completions',
          headers: { authorization: `Bearer ${keys[i % keys.length] as string}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            model: MODEL,
            stream: true,
            messages: [
              { role: 'user', content: `held ${i} [[sim chunks=${chunks} tokensPerSecond=${tokensPerSecond}]]` },
            ],
          }),
        });
        let text = '';
        for await (const c of r.body) {
          text += (c as Buffer).toString('utf8');
          if (!counted && text.includes('"content"')) {
            counted = true;
            peak = Math.max(peak, ++open);
            settle();
          }
        }
        if (counted) open--;
        else settle();
        const tokens = [...text.matchAll(/"content":"(t\d+ )"/g)].map((m) => m[1]);
        if (
          r.statusCode === 200 &&
          text.endsWith('data: [DONE]\n\n') &&
          tokens.join('') === expectedTokens(chunks).join('')
        )
          completed++;
        else fail(`HTTP ${r.statusCode}, ${tokens.length} tokens, ends: ${text.slice(-160)}`);
      } catch (err) {
        fail(`client error: ${(err as Error).message}`);
        if (!counted) settle();
      }
    }),
  );
  await pool.close();
  return {
    streams,
    allOpenAtOnce: peak === streams,
    peak,
    completed,
    errors,
    firstErrors,
    ms: Math.round(performance.now() - started),
  };
}
