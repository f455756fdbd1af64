/**
 * What reaches the model server means what was checked: JSON key tricks, rewritten bodies.
 * One describe per defect found, its story above it.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Harness, MODEL, post, readyInstance, setupReadyInstance, startHarness } from '../reliability/harness.js';

/**
 * Regression: the proxy checked the body as JSON.parse reads it and forwarded the
 * client's bytes, which Ollama reads with Go's encoding/json: field names match case-insensitively
 * and the last duplicate wins. `{"model":"gemma4:26b","MODEL":"llama3:70b"}` through a gemma env.key
 * was answered by llama3:70b; `"Temperature":50` passed the range check; a second `stream` made
 * the proxy and the model server disagree on streaming. Such bodies are now refused with 400
 * invalid_json naming the env.key, and nothing reaches the model server.
 */
describe('JSON key tricks are refused with invalid_json', () => {
  const env = setupReadyInstance({ id: 'gpu-1' });

  const MSG = '"messages":[{"role":"user","content":"hi"}]';

  describe('bodies that two JSON decoders read differently never reach the model server', () => {
    it.each([
      [
        'a case variant of model',
        `{"model":"${MODEL}","MODEL":"llama3:70b",${MSG}}`,
        'MODEL',
        'differs from the field "model" only by case',
      ],
      [
        'a case variant alone',
        `{"model":"${MODEL}","Temperature":50,${MSG}}`,
        'Temperature',
        'differs from the field "temperature" only by case',
      ],
      [
        'the Kelvin sign folding onto k',
        `{"model":"${MODEL}","max_to\u212Aens":100000,"max_tokens":2,${MSG}}`,
        'max_to\u212Aens',
        'differs from the field "max_tokens" only by case',
      ],
      [
        'the long s folding onto s',
        `{"model":"${MODEL}","\u017Ftream":true,${MSG}}`,
        '\u017Ftream',
        'differs from the field "stream" only by case',
      ],
      [
        'a case variant in stream_options',
        `{"model":"${MODEL}","stream":true,"stream_options":{"Include_Usage":false},${MSG}}`,
        'stream_options.Include_Usage',
        'differs from the field "include_usage" only by case',
      ],
    ])('%s: 400 invalid_json naming the key', async (_what, body, param, says) => {
      const before = env.sim.requests.length;
      const r = await post(env.h.baseUrl, env.key, body);
      expect(r.status).toBe(400);
      expect(r.json).toEqual({
        error: { message: expect.stringContaining(says), type: 'invalid_request_error', code: 'invalid_json', param },
      });
      expect(env.sim.requests.length).toBe(before);
    });

    it.each([
      ['model twice', `{"model":"llama3:70b","model":"${MODEL}",${MSG}}`],
      ['stream twice', `{"model":"${MODEL}","stream":false,"stream":true,${MSG}}`],
      ['a env.key written with an escape, repeating another', `{"model":"${MODEL}","mod\\u0065l":"llama3:70b",${MSG}}`],
      [
        'a repeated env.key deep inside a tool schema',
        `{"model":"${MODEL}",${MSG},"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"string","type":"number"}}}}}]}`,
      ],
    ])('%s: 400 invalid_json', async (_what, body) => {
      const before = env.sim.requests.length;
      const r = await post(env.h.baseUrl, env.key, body);
      expect(r.status).toBe(400);
      expect(r.json).toEqual({
        error: {
          message: expect.stringContaining('repeats a key'),
          type: 'invalid_request_error',
          code: 'invalid_json',
          param: null,
        },
      });
      expect(env.sim.requests.length).toBe(before);
    });

    it("keys of the client's own objects may differ by case, and such a body reaches the model server byte for byte", async () => {
      const body = `{"model":"${MODEL}",${MSG},"metadata":{"Run":"a","run":"b"},"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"ID":{"type":"string"},"id":{"type":"string"}}}}}]}`;
      const r = await post(env.h.baseUrl, env.key, body);
      expect(r.status).toBe(200);
      const seen = await env.sim.waitFor((q) => JSON.stringify(q.body).includes('"Run":"a"'));
      expect(seen.body).toEqual(JSON.parse(body));
    });

    it('a body that is not UTF-8 is refused, not repaired differently by each decoder', async () => {
      const bytes = Buffer.concat([
        Buffer.from(`{"model":"${MODEL}","messages":[{"role":"user","content":"`),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('"}]}'),
      ]);
      const r = await post(env.h.baseUrl, env.key, bytes);
      expect(r.json).toEqual({
        error: {
          message: 'The request body is not valid UTF-8. Send JSON encoded as UTF-8.',
          type: 'invalid_request_error',
          code: 'invalid_json',
          param: null,
        },
      });
    });

    it('a body declared in another charset is refused', async () => {
      const r = await post(env.h.baseUrl, env.key, `{"model":"${MODEL}",${MSG}}`, {
        'content-type': 'application/json; charset=utf-16',
      });
      expect(r.json).toEqual({
        error: {
          message: 'The body must be UTF-8: send Content-Type: application/json (charset=utf-8, if any).',
          type: 'invalid_request_error',
          code: 'invalid_request',
          param: null,
        },
      });
      const ok = await post(env.h.baseUrl, env.key, `{"model":"${MODEL}",${MSG}}`, {
        'content-type': 'application/json; charset="UTF-8"',
      });
      expect(ok.status).toBe(200);
    });
  });
});

/**
 * Regression (what reaches the model server means what was checked): a body the proxy
 * must rewrite (a `developer` turn, `max_completion_tokens`, a stream's `stream_options`) was
 * sent upstream as JSON.stringify wrote it, with every number as JavaScript holds it: a seed of
 * 9007199254740993 arrived as 9007199254740992, and 1e400 in a field passed through as null.
 * Now a rewritten body keeps each number as the client wrote it; only the rewritten fields change.
 */
describe('a rewritten body keeps each number as written', () => {
  let h: Harness;
  let key: string;
  const received: string[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method === 'GET') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ object: 'list', data: [{ id: MODEL, object: 'model' }] }));
      return;
    }
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      received.push(Buffer.concat(chunks).toString('utf8'));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id: 'chatcmpl-1',
          object: 'chat.completion',
          created: 1,
          model: MODEL,
          choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
        }),
      );
    });
  });

  beforeAll(async () => {
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    h = await startHarness();
    key = await readyInstance(h, 'gpu-1', `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  afterAll(async () => {
    await h.stop();
    server.closeAllConnections();
    server.close();
  });

  /** Sends `text` as the body, byte for byte; returns what the model server received. */
  async function relay(text: string): Promise<string> {
    const before = received.length;
    const r = await post(h.baseUrl, key, text);
    expect(r.status).toBe(200);
    expect(received.length).toBe(before + 1);
    return received.at(-1) as string;
  }

  it('a developer turn: the role becomes system, and every number goes as written', async () => {
    const sent = await relay(
      `{"model":"${MODEL}","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":"hi"}],` +
        `"seed":9007199254740993,"temperature":0.10000000000000001,"x_vendor":{"big":1e400,"neg":-0,"f":1.50},"logit_bias":{"50256":-100}}`,
    );
    expect(sent).toBe(
      `{"model":"${MODEL}","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],` +
        `"seed":9007199254740993,"temperature":0.10000000000000001,"x_vendor":{"big":1e400,"neg":-0,"f":1.50},"logit_bias":{"50256":-100}}`,
    );
  });

  it('max_completion_tokens carried as max_tokens: the seed and the cap as written', async () => {
    const sent = await relay(
      `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":64,"seed":18446744073709551615}`,
    );
    expect(sent).toBe(
      `{"model":"${MODEL}","messages":[{"role":"user","content":"hi"}],"seed":18446744073709551615,"max_tokens":64}`,
    );
  });

  it('a client\'s "__proto__" key goes upstream as a key, not lost', async () => {
    const sent = await relay(
      `{"model":"${MODEL}","messages":[{"role":"developer","content":"x"}],"x_vendor":{"__proto__":{"a":1}}}`,
    );
    expect(sent).toBe(
      `{"model":"${MODEL}","messages":[{"role":"system","content":"x"}],"x_vendor":{"__proto__":{"a":1}}}`,
    );
  });
});
