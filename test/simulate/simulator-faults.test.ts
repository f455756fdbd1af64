import { afterEach, describe, expect, it } from 'vitest';
import { buildSimulator, type Simulator, type SimulatorOptions } from '../../simulator/simulator.js';
import { chat, collect, data, frames, MODEL, rawRequest, until, userMessage } from './helpers.js';

let sim: Simulator | null = null;

async function start(opts: Partial<SimulatorOptions> = {}): Promise<string> {
  sim = buildSimulator({ models: [MODEL], ...opts });
  return sim.listen(0);
}

afterEach(async () => {
  await sim?.close();
  sim = null;
});

const streamBody = (content = 'go'): object => ({ ...userMessage(content), stream: true });
const post = (base: string, body: object): ReturnType<typeof rawRequest> =>
  rawRequest(base, {
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
const contents = (fs: string[]): unknown[] =>
  fs.map((f) => (data(f) as { choices: { delta: { content?: string } }[] }).choices[0]?.delta.content);

describe('failure modes on the wire', () => {
  it('http-error: errorStatus with the runner error envelope', async () => {
    const base = await start({ fail: 'http-error' });
    for (const stream of [false, true]) {
      const res = await chat(base, { ...userMessage('x'), stream });
      expect(res.status).toBe(500);
      expect(res.headers.get('content-type')).toBe('application/json');
      expect(await res.json()).toStrictEqual({
        error: {
          message:
            'model runner has unexpectedly stopped, this may be due to resource limitations or an internal error',
          type: 'api_error',
          param: null,
          code: null,
        },
      });
    }
    sim!.configure({ errorStatus: 404 });
    expect(((await (await chat(base, userMessage('x'))).json()) as { error: { type: string } }).error.type).toBe(
      'not_found_error',
    );
  });

  it('html-500: a text/html page', async () => {
    const base = await start({ fail: 'html-500' });
    const res = await chat(base, streamBody());
    expect(res.status).toBe(500);
    expect(res.headers.get('content-type')).toBe('text/html');
    expect(await res.text()).toMatch(/^<html>[\s\S]*500 Internal Server Error[\s\S]*<\/html>\r\n$/);
  });

  it('invalid-json: 200 JSON that does not parse; streaming, one frame that does not parse and no [DONE]', async () => {
    const base = await start({ fail: 'invalid-json' });
    const res = await chat(base, userMessage('x'));
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    const text = await res.text();
    expect(text.startsWith('{"id":"chatcmpl-')).toBe(true);
    expect(() => JSON.parse(text)).toThrow();

    const { frames: fs, error } = await collect(await chat(base, streamBody()));
    expect(error).toBeNull();
    expect(fs).toHaveLength(1);
    expect(() => data(fs[0]!)).toThrow();
  });

  it('garbage: 200 text/event-stream carrying no SSE frame', async () => {
    const base = await start({ fail: 'garbage' });
    const res = await post(base, streamBody());
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(res.body.length).toBeGreaterThan(0);
    expect(res.body.toString('latin1')).not.toMatch(/data:|\n\n/);
  });

  it('reset-before-headers: the connection is reset with no response', async () => {
    const base = await start({ fail: 'reset-before-headers' });
    await expect(post(base, userMessage('x'))).rejects.toMatchObject({ code: 'ECONNRESET' });
    const r = await sim!.waitFor((x) => x.endedAt !== null);
    expect(r).toMatchObject({ aborted: false, completed: false });
  });

  it('hang: the request is read and recorded, no headers ever; a client abort is recorded', async () => {
    const base = await start({ fail: 'hang' });
    const ac = new AbortController();
    const pending = chat(base, userMessage('wait'), { signal: ac.signal });
    await sim!.waitFor((r) => r.body !== null);
    expect(sim!.stats.inFlight).toBe(1);
    ac.abort();
    await expect(pending).rejects.toThrow();
    const r = await sim!.waitFor((x) => x.aborted);
    expect(r).toMatchObject({ aborted: true, completed: false, chunksSent: 0 });
    expect(sim!.stats).toStrictEqual({ received: 1, inFlight: 0, aborted: 1, completed: 0 });
  });

  it('hang-mid-stream: failAfterChunks chunks, then silence on an open socket', async () => {
    const base = await start({ fail: 'hang-mid-stream', failAfterChunks: 2 });
    const ac = new AbortController();
    const res = await chat(base, streamBody(), { signal: ac.signal });
    expect(res.status).toBe(200);
    const got: string[] = [];
    for await (const f of frames(res)) {
      got.push(f);
      if (got.length === 2) break; // leaving the loop cancels the body
    }
    expect(sim!.requests[0]).toMatchObject({ completed: false, endedAt: null, chunksSent: 2 });
    ac.abort();
    expect(contents(got)).toStrictEqual(['t0 ', 't1 ']);
    const r = await sim!.waitFor((x) => x.aborted);
    expect(r.chunksSent).toBe(2);
  });

  it('hang-mid-stream without stream: no headers, like hang', async () => {
    const base = await start({ fail: 'hang-mid-stream' });
    const ac = new AbortController();
    const pending = chat(base, userMessage('x'), { signal: ac.signal });
    await sim!.waitFor((r) => r.body !== null);
    ac.abort();
    await expect(pending).rejects.toThrow();
    await sim!.waitFor((r) => r.aborted);
  });

  it('drop-mid-stream: failAfterChunks chunks, then the connection is cut', async () => {
    const base = await start({ fail: 'drop-mid-stream', failAfterChunks: 3 });
    const { frames: fs, error } = await collect(await chat(base, streamBody()));
    expect(error).not.toBeNull();
    expect(contents(fs)).toStrictEqual(['t0 ', 't1 ', 't2 ']);
    const r = await sim!.waitFor((x) => x.endedAt !== null);
    expect(r).toMatchObject({ aborted: false, completed: false, chunksSent: 3 });
  });

  it('drop-mid-stream without stream: headers and half the body, then cut', async () => {
    const base = await start({ fail: 'drop-mid-stream' });
    const res = await chat(base, userMessage('x'));
    expect(res.status).toBe(200);
    await expect(res.text()).rejects.toThrow();
  });

  it('eof-mid-stream: failAfterChunks chunks then a clean end, without finish chunk or [DONE]', async () => {
    const base = await start({ fail: 'eof-mid-stream', failAfterChunks: 2, chunks: 6 });
    const { frames: fs, error } = await collect(
      await chat(base, { ...streamBody(), stream_options: { include_usage: true } }),
    );
    expect(error).toBeNull();
    expect(contents(fs)).toStrictEqual(['t0 ', 't1 ']);
    // non-streaming: Ollama's silent truncation, finish_reason null
    const body = (await (await chat(base, userMessage('x'))).json()) as {
      choices: unknown[];
      usage: { completion_tokens: number };
    };
    expect(body.choices).toStrictEqual([
      { index: 0, message: { role: 'assistant', content: 't0 t1 ' }, finish_reason: null },
    ]);
    expect(body.usage.completion_tokens).toBe(2);
  });

  it('slow-drip: paced by tokensPerSecond, and still completes', async () => {
    const base = await start({ fail: 'slow-drip', tokensPerSecond: 40, chunks: 4 });
    const t0 = Date.now();
    const { frames: fs, error } = await collect(await chat(base, streamBody()));
    expect(error).toBeNull();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(3 * 25 - 5);
    expect(contents(fs.slice(0, 4))).toStrictEqual(['t0 ', 't1 ', 't2 ', 't3 ']);
    expect(fs.at(-1)).toBe('data: [DONE]');
    const whole = (await (await chat(base, userMessage('x'))).json()) as {
      choices: { message: { content: string } }[];
    };
    expect(whole.choices[0]!.message.content).toBe('t0 t1 t2 t3 ');
  });

  it('slow-drip defaults to one chunk a second', async () => {
    const base = await start({ fail: 'slow-drip', chunks: 2 });
    // Timed from before the request, not from the client's read of the first chunk: under load that
    // read can come late, while a timer never fires early, so the second chunk's second is a floor.
    const t0 = Date.now();
    const res = await chat(base, streamBody());
    const reader = res.body!.getReader();
    await reader.read();
    await sim!.waitFor((r) => r.chunksSent === 2);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    await reader.cancel();
  });

  it('firstTokenDelayMs delays the headers', async () => {
    const base = await start({ firstTokenDelayMs: 120 });
    const t0 = Date.now();
    const res = await chat(base, streamBody('[[sim firstTokenDelayMs=150]]'));
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    await res.text();
  });
});

describe('client disconnects', () => {
  it('when the client aborts mid-stream then the record is aborted and generation stops', async () => {
    const base = await start({ chunks: 1000, tokensPerSecond: 50 });
    const ac = new AbortController();
    const res = await chat(base, streamBody(), { signal: ac.signal });
    const reader = res.body!.getReader();
    await reader.read();
    ac.abort();
    const r = await sim!.waitFor((x) => x.aborted);
    expect(r.completed).toBe(false);
    expect(r.endedAt).not.toBeNull();
    const sent = r.chunksSent;
    expect(sent).toBeLessThan(1000);
    expect(sim!.stats).toMatchObject({ inFlight: 0, aborted: 1 });
    // A negative check needs a bounded wait: the next chunk would have been due within 20 ms.
    await new Promise((resolve) => setTimeout(resolve, 60));
    expect(sim!.requests[0]!.chunksSent).toBe(sent);
  });

  it('close() rejects pending waiters, cuts hanging requests, and leaves no handles', async () => {
    const count = (type: string): number => process.getActiveResourcesInfo().filter((t) => t === type).length;
    const before = { server: count('TCPServerWrap'), socket: count('TCPSocketWrap') };
    const base = await start({ fail: 'hang-mid-stream', chunks: 50, tokensPerSecond: 1 });
    const settle = (p: Promise<unknown>): Promise<unknown> =>
      p.then(
        () => 'completed',
        (e: unknown) => e,
      );
    const hung = settle(post(base, streamBody()));
    const hung2 = settle(post(base, streamBody('[[sim fail=none]]')));
    await sim!.waitFor((r) => r.seq === 2 && r.chunksSent === 1);
    const waiter = sim!.waitFor(() => false, 10_000);
    await sim!.close();
    await expect(waiter).rejects.toThrow(/closed/);
    expect(await hung).toBeInstanceOf(Error);
    expect(await hung2).toBeInstanceOf(Error);
    expect(sim!.stats).toMatchObject({ inFlight: 0, aborted: 0 });
    await until(() => count('TCPServerWrap') <= before.server && count('TCPSocketWrap') <= before.socket);
    await expect(sim!.waitFor(() => true)).rejects.toThrow(/closed/);
    sim = null;
  });
});
