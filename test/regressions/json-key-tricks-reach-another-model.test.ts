/**
 * Regression: the proxy checked the body as JSON.parse reads it and forwarded the
 * client's bytes, which Ollama reads with Go's encoding/json: field names match case-insensitively
 * and the last duplicate wins. `{"model":"gemma4:26b","MODEL":"llama3:70b"}` through a gemma env.key
 * was answered by llama3:70b; `"Temperature":50` passed the range check; a second `stream` made
 * the proxy and the model server disagree on streaming. Such bodies are now refused with 400
 * invalid_json naming the env.key, and nothing reaches the model server.
 */
import { describe, expect, it } from 'vitest';
import { MODEL, post, setupReadyInstance } from '../reliability/harness.js';

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
