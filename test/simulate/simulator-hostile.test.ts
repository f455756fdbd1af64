/** The simulator's hostile modes send what they say, and stop when the client goes away. */
import { afterEach, describe, expect, it } from 'vitest';
import { buildSimulator, type Simulator } from '../../simulator/simulator.js';
import { MODEL, chat, rawRequest, until, userMessage } from './helpers.js';

let sim: Simulator | null = null;
async function start(): Promise<string> {
  sim = buildSimulator({ models: [MODEL], chunks: 3 });
  return sim.listen(0);
}
afterEach(async () => {
  await sim?.close();
  sim = null;
});

const ask = (base: string, directive: string, stream: boolean): ReturnType<typeof rawRequest> =>
  rawRequest(base, {
    method: 'POST',
    path: '/v1/chat/completions',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...userMessage(`go ${directive}`), stream }),
  });

describe('hostile modes', () => {
  it('endless-line: one event that never ends, until the client leaves', async () => {
    const base = await start();
    const res = await chat(base, { ...userMessage('[[sim fail=endless-line]]'), stream: true });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    let bytes = 0;
    let text = '';
    while (bytes < 1_000_000) {
      const { value } = await reader.read();
      bytes += value?.length ?? 0;
      if (text.length < 200) text += new TextDecoder().decode(value);
    }
    expect(text.startsWith('data: {"id":"chatcmpl-')).toBe(true);
    expect(text.slice(0, 200)).not.toContain('\n');
    await reader.cancel();
    await until(() => sim!.stats.inFlight === 0 && sim!.stats.aborted === 1);
  });

  it('huge-body and huge-error: a well-formed body of bodyBytes, with its length', async () => {
    const base = await start();
    const plain = await ask(base, '[[sim fail=huge-body bodyBytes=100000]]', false);
    expect(plain.status).toBe(200);
    expect(Number(plain.headers['content-length'])).toBe(plain.body.length);
    expect(
      (JSON.parse(plain.body.toString()) as { choices: { message: { content: string } }[] }).choices[0]?.message
        .content,
    ).toHaveLength(100_000);
    const err = await ask(base, '[[sim fail=huge-error errorStatus=503 bodyBytes=100000]]', false);
    expect(err.status).toBe(503);
    expect((JSON.parse(err.body.toString()) as { error: { message: string } }).error.message).toHaveLength(100_000);
  });

  it('bad-status: the status asked for; 204 and 304 without a body', async () => {
    const base = await start();
    for (const status of [204, 304]) {
      const r = await ask(base, `[[sim fail=bad-status status=${status}]]`, false);
      expect({ status: r.status, body: r.body.length }).toEqual({ status, body: 0 });
    }
  });

  it('sse-fields, named-event, error events, html-frames: the bytes the tests rely on', async () => {
    const base = await start();
    const text = async (d: string): Promise<string> => (await ask(base, d, true)).body.toString();
    const fields = await text('[[sim fail=sse-fields]]');
    expect(fields).toMatch(/^: keep-alive\n\nretry: 3000\n\nid: 0\nevent: message\ndata: \{/);
    expect(fields).toContain('\r\n\r\n');
    expect(fields.endsWith('data: [DONE]\r\n\r\n') || fields.endsWith('data: [DONE]\n\n')).toBe(true);
    expect(await text('[[sim fail=named-event failAfterChunks=1]]')).toContain(
      'event: telemetry\ndata: {"gpu":0.93}\n\n',
    );
    expect(await text('[[sim fail=error-event failAfterChunks=0]]')).toMatch(
      /^data: \{"error":\{"message":"model runner/,
    );
    expect(await text('[[sim fail=broken-error-event failAfterChunks=0]]')).toBe(
      'data: {"error" <not json>\n\ndata: [DONE]\n\n',
    );
    expect(await text('[[sim fail=named-error-event failAfterChunks=0]]')).toBe(
      'event: error\ndata: {"message":"boom","code":"overloaded"}\n\n',
    );
    expect(await text('[[sim fail=html-frames]]')).toContain('<html>\n\n');
  });
});
