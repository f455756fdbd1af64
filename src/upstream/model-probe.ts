import { Agent } from 'undici';
import { printable } from '../printable.js';

export type ProbeStatus = 'reachable' | 'unreachable' | 'model missing';

export interface ProbeResult {
  status: ProbeStatus;
  /** What failed, in a sentence naming the endpoint; null when reachable. */
  error: string | null;
}

export interface ProbeOptions {
  /** Connect, headers and body together: a probe never waits longer. */
  timeoutMs: number;
  /** A model list is a few KiB; a server sending more is not the model server we want. */
  maxBytes: number;
}

export const DEFAULT_PROBE_OPTIONS: ProbeOptions = { timeoutMs: 5_000, maxBytes: 1024 * 1024 };

/**
 * Asks a model server which models it serves (`GET {endpoint}/v1/models`, the OpenAI list both
 * Ollama and vLLM answer) and whether `model` is among them. Never sent with a client's key:
 * only the instance's own upstream token, when it has one. Bounded in time and size, never
 * throws: every failure is a result with a sentence an operator can act on.
 */
export class ModelProbe {
  // Its own connections: a probe never queues behind, or holds a socket of, the chat pools.
  private readonly agent: Agent;

  constructor(private readonly options: ProbeOptions = DEFAULT_PROBE_OPTIONS) {
    this.agent = new Agent({ connect: { timeout: options.timeoutMs }, keepAliveTimeout: 1_000, connections: 4 });
  }

  async probe(endpoint: string, model: string, token: string | undefined): Promise<ProbeResult> {
    const url = `${endpoint.replace(/\/+$/, '')}/v1/models`;
    const unreachable = (why: string): ProbeResult => ({ status: 'unreachable', error: `GET ${url}: ${why}` });
    const signal = AbortSignal.timeout(this.options.timeoutMs);
    let text: string;
    try {
      const res = await this.agent.request({
        origin: new URL(url).origin,
        path: new URL(url).pathname,
        method: 'GET',
        signal,
        headers: {
          accept: 'application/json',
          'accept-encoding': 'identity',
          ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        },
        headersTimeout: this.options.timeoutMs,
        bodyTimeout: this.options.timeoutMs,
      });
      const chunks: Buffer[] = [];
      let bytes = 0;
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        bytes += chunk.length;
        if (bytes > this.options.maxBytes) {
          res.body.destroy();
          return unreachable(`the answer is larger than ${this.options.maxBytes} bytes (is this a model server?)`);
        }
        chunks.push(chunk);
      }
      text = Buffer.concat(chunks).toString('utf8');
      if (res.statusCode !== 200)
        return unreachable(
          `HTTP ${res.statusCode}${res.statusCode === 401 || res.statusCode === 403 ? ' (does the model server need --upstream-token-file?)' : ''}`,
        );
    } catch (err) {
      return unreachable(signal.aborted ? `no answer within ${this.options.timeoutMs / 1000} s` : describe(err));
    }
    let served: string[];
    try {
      served = servedModels(JSON.parse(text));
    } catch {
      return unreachable("the answer is not an OpenAI model list (is this the model server's base URL?)");
    }
    if (served.includes(model)) return { status: 'reachable', error: null };
    const list =
      served.length === 0
        ? 'none'
        : served
            .slice(0, 10)
            .map((m) => printable(m.slice(0, 100)))
            .join(', ');
    return { status: 'model missing', error: `GET ${url}: model ${model} is not served (it serves: ${list})` };
  }

  async close(): Promise<void> {
    await this.agent.close();
  }
}

/** Model ids of an OpenAI list; Ollama sends `"data": null` when it has none. */
function servedModels(body: unknown): string[] {
  if (typeof body !== 'object' || body === null) throw new Error('not an object');
  const data = (body as { data?: unknown }).data;
  if (data === null) return [];
  if (!Array.isArray(data)) throw new Error('no data');
  return data.flatMap((m) =>
    typeof m === 'object' && m !== null && typeof (m as { id?: unknown }).id === 'string'
      ? [(m as { id: string }).id]
      : [],
  );
}

function describe(err: unknown): string {
  const code = (err as { code?: unknown }).code;
  if (code === 'ECONNREFUSED') return 'connection refused (is the model server running on that port?)';
  if (code === 'UND_ERR_CONNECT_TIMEOUT') return 'no connection in time (is the host up and the port open?)';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'the host name does not resolve';
  return typeof code === 'string' ? `${code} (${(err as Error).message})` : (err as Error).message;
}
