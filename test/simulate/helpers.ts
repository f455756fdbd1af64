/** Client helpers for the simulator tests: real sockets, no fixed sleeps. */
import { request, type IncomingHttpHeaders } from 'node:http';

export const MODEL = 'gemma4:26b';

export interface RawResponse {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/** One request on a fresh connection (agent: false), with full control of the headers. */
export function rawRequest(
  baseUrl: string,
  opts: { method?: string; path: string; headers?: Record<string, string>; body?: string },
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      `${baseUrl}${opts.path}`,
      { method: opts.method ?? 'GET', headers: opts.headers, agent: false },
      (res) => {
        const parts: Buffer[] = [];
        res.on('data', (b: Buffer) => parts.push(b));
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(parts) }));
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

export function chat(baseUrl: string, body: unknown, init: RequestInit = {}): Promise<Response> {
  return fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: typeof body === 'string' ? body : JSON.stringify(body),
    ...init,
  });
}

export function userMessage(content: string): { model: string; messages: { role: string; content: string }[] } {
  return { model: MODEL, messages: [{ role: 'user', content }] };
}

/** Yields the SSE frames (text between "\n\n") as they arrive; throws if the body errors. */
export async function* frames(res: Response): AsyncGenerator<string> {
  if (res.body === null) return;
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buf = '';
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let i: number;
      while ((i = buf.indexOf('\n\n')) >= 0) {
        yield buf.slice(0, i);
        buf = buf.slice(i + 2);
      }
    }
    finished = true;
  } finally {
    if (!finished) await reader.cancel().catch(() => undefined); // the consumer stopped early: go away
  }
  if (buf !== '') yield buf;
}

/** Every frame of a stream, and the error that ended it if it did not end cleanly. */
export async function collect(res: Response): Promise<{ frames: string[]; error: unknown }> {
  const out: string[] = [];
  try {
    for await (const f of frames(res)) out.push(f);
    return { frames: out, error: null };
  } catch (error) {
    return { frames: out, error };
  }
}

/** The JSON payload of a `data: {...}` frame. */
export function data(frame: string): unknown {
  if (!frame.startsWith('data: ')) throw new Error(`not a data frame: ${frame}`);
  return JSON.parse(frame.slice(6));
}

/** Polls `check` on the event loop (setImmediate/setTimeout(0)) until true, or fails. */
export async function until(check: () => boolean, timeoutMs = 3000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error('until: condition not met in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}
