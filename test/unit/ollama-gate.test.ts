/**
 * The gates of Ollama's own API (src/apis/ollama/request.ts) and its stream relay
 * (ndjson-relay.ts), alone: what is read and refused (the model, the stream flag, num_predict as
 * Ollama takes it, case variants of the fields read), what is left to Ollama (option keys by
 * other case, unknown fields), and the NDJSON lines relayed as their bytes came, whatever the
 * reads' boundaries, with the usage of the `done` line, Ollama's error line passed on and a
 * broken or endless line refused.
 */
import { describe, expect, it } from 'vitest';
import { NdjsonRelay } from '../../src/apis/ollama/ndjson-relay.js';
import {
  parseOllamaChatBody,
  parseOllamaGenerateBody,
  parseOllamaShowBody,
  showModel,
  validateOllamaChat,
  validateOllamaEmbed,
  validateOllamaGenerate,
} from '../../src/apis/ollama/request.js';
import { ObProxyError, obError } from '../../src/errors.js';

const chat = (body: unknown) => validateOllamaChat(parseOllamaChatBody(Buffer.from(JSON.stringify(body))));

function refusal(f: () => unknown): { code: string; param: string | null; message: string } {
  try {
    f();
  } catch (err) {
    if (err instanceof ObProxyError) return { code: err.code, param: err.param, message: err.message };
    throw err;
  }
  throw new Error('not refused');
}

const MSG = [{ role: 'user', content: 'hi' }];

describe('the gate of /api/chat and /api/generate', () => {
  it('streams unless told false (absent and null alike), as Ollama does', () => {
    expect(chat({ model: 'm', messages: MSG }).stream).toBe(true);
    expect(chat({ model: 'm', messages: MSG, stream: null }).stream).toBe(true);
    expect(chat({ model: 'm', messages: MSG, stream: true }).stream).toBe(true);
    expect(chat({ model: 'm', messages: MSG, stream: false }).stream).toBe(false);
    expect(refusal(() => chat({ model: 'm', stream: 'no' }))).toEqual({
      code: 'invalid_request',
      param: 'stream',
      message: 'stream must be true or false.',
    });
  });

  it('takes num_predict as Ollama does: the integer part, at least 1; negative or absent, no cap', () => {
    const cap = (num_predict: unknown) => chat({ model: 'm', options: { num_predict } }).completionCap;
    expect([cap(64), cap(2.7), cap(0), cap(-1), cap(-2), cap(null), cap(undefined)]).toEqual([
      64,
      2,
      1,
      null,
      null,
      null,
      null,
    ]);
    expect(chat({ model: 'm' }).completionCap).toBeNull();
    expect(refusal(() => cap('64'))).toEqual({
      code: 'invalid_request',
      param: 'options.num_predict',
      message: 'options.num_predict must be a number: the most tokens to generate.',
    });
    expect(refusal(() => chat({ model: 'm', options: 'x' })).param).toBe('options');
  });

  it('reads temperature and top_p from the options for traces, and refuses neither', () => {
    const r = chat({ model: 'm', options: { temperature: 0.2, top_p: 'x', seed: 1 } });
    expect([r.temperature, r.topP]).toEqual([0.2, null]);
  });

  it('requires a model, a non-empty string', () => {
    expect(refusal(() => chat({ messages: MSG }))).toEqual({
      code: 'invalid_request',
      param: 'model',
      message: 'model is required: name the model of your deployment.',
    });
    expect(refusal(() => chat({ model: '' })).message).toBe('model must be a non-empty string.');
    expect(refusal(() => chat({ model: 7 })).param).toBe('model');
  });

  it('refuses a key that Go would take for a field read, at the top; option keys by other case are Ollama’s', () => {
    const body = (text: string) => () => parseOllamaChatBody(Buffer.from(text));
    expect(refusal(body('{"model":"m","Stream":false}'))).toEqual({
      code: 'invalid_json',
      param: 'Stream',
      message: '"Stream" differs from the field "stream" only by case. Send the field as "stream".',
    });
    expect(refusal(body('{"model":"m","MODEL":"x"}')).code).toBe('invalid_json');
    expect(refusal(body('{"model":"m","model":"x"}')).code).toBe('invalid_json');
    // Ollama reads options from a map by their exact names: NUM_PREDICT is not num_predict to it.
    expect(chat({ model: 'm', options: { NUM_PREDICT: 5 } }).completionCap).toBeNull();
    expect(chat({ model: 'm', think: true, keep_alive: '5m', format: 'json', tools: [], invented: 1 }).model).toBe('m');
  });

  it('counts the images of chat turns and of a generate request for the estimate', () => {
    expect(chat({ model: 'm', messages: [{ role: 'user', content: 'x', images: ['aGk=', 'aGV5'] }] }).media).toEqual({
      parts: 2,
      chars: 8,
    });
    const g = validateOllamaGenerate(parseOllamaGenerateBody(Buffer.from('{"model":"m","images":["aGk="]}')));
    expect(g.media).toEqual({ parts: 1, chars: 4 });
  });

  it('an embedding is plain and caps nothing it generates', () => {
    expect(validateOllamaEmbed({ model: 'm', input: ['a', 'b'] })).toEqual({
      model: 'm',
      stream: false,
      media: { parts: 0, chars: 0 },
      completionCap: 0,
      temperature: null,
      topP: null,
    });
  });

  it('/api/show names its model in `model`, or the older `name` when `model` is empty', () => {
    const show = (text: string) => showModel(parseOllamaShowBody(Buffer.from(text)));
    expect(show('{"model":"m"}')).toEqual({ model: 'm', field: 'model' });
    expect(show('{"name":"m"}')).toEqual({ model: 'm', field: 'name' });
    expect(show('{"model":"","name":"m"}')).toEqual({ model: 'm', field: 'name' });
    expect(show('{"model":"a","name":"b"}')).toEqual({ model: 'a', field: 'model' });
    expect(refusal(() => show('{}')).param).toBe('model');
    expect(refusal(() => show('{"NAME":"x","name":"m"}')).code).toBe('invalid_json');
  });
});

const LINE = (i: number) =>
  `{"model":"m","created_at":"2026-11-29T06:25:18Z","message":{"role":"assistant","content":"t${i} "},"done":false}\n`;
const DONE =
  '{"model":"m","created_at":"2026-11-29T06:25:18Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","total_duration":5,"prompt_eval_count":30,"eval_count":3}\n';

describe('the NDJSON relay', () => {
  it('relays lines as their bytes came, whatever the reads’ boundaries, and ends at the done line with its counts', () => {
    const stream = LINE(0) + LINE(1) + LINE(2) + DONE + '{"after":true}\n';
    for (const size of [1, 7, 64, stream.length]) {
      const r = new NdjsonRelay();
      let out = '';
      for (let i = 0; i < stream.length && !r.stopped; i += size) out += r.push(Buffer.from(stream.slice(i, i + size)));
      expect(out).toBe(LINE(0) + LINE(1) + LINE(2) + DONE);
      expect([r.done, r.sawError, r.invalid, r.contentChunks]).toEqual([true, false, false, 3]);
      expect(r.counts()).toEqual({ prompt: 30, completion: 3, reasoning: 0 });
    }
  });

  it('keeps multi-byte characters split between reads, and drops blank lines', () => {
    const line = '{"message":{"content":"héllo ✓"},"done":false}\n';
    const bytes = Buffer.from(`\n${line}\r\n${DONE}`);
    const r = new NdjsonRelay();
    const out = [r.push(bytes.subarray(0, 26)), r.push(bytes.subarray(26))].join('');
    expect(out).toBe(line + DONE);
  });

  it('passes Ollama’s error line on, its last, with the instance’s upstream token cleared', () => {
    const r = new NdjsonRelay(1024, 'sk-up');
    const out = r.push(Buffer.from(`${LINE(0)}{"error":"runner failed for Bearer sk-up"}\n${LINE(1)}`));
    expect(out).toBe(`${LINE(0)}{"error":"runner failed for Bearer [upstream token]"}\n`);
    expect([r.sawError, r.stopped, r.done]).toEqual([true, true, false]);
  });

  it('refuses a line that is not a JSON object, and one that never ends within the cap', () => {
    for (const bad of ['[1,2]\n', 'not json\n', '"text"\n']) {
      const r = new NdjsonRelay();
      expect(r.push(Buffer.from(LINE(0) + bad + DONE))).toBe(LINE(0));
      expect([r.invalid, r.invalidReason]).toEqual([true, 'not_json']);
    }
    const r = new NdjsonRelay(100);
    expect(r.push(Buffer.from('{"a":"'))).toBe('');
    expect(r.push(Buffer.alloc(200, 'x'))).toBe('');
    expect([r.invalid, r.invalidReason]).toEqual([true, 'frame_too_large']);
  });

  it('our own closing error is one line in Ollama’s shape', () => {
    expect(new NdjsonRelay().closingError(obError('revoked_api_key'))).toBe(
      `${JSON.stringify({
        error: 'This API key has been revoked and can never be used again. Ask whoever gave you the key for a new one.',
        code: 'revoked_api_key',
      })}\n`,
    );
  });
});
