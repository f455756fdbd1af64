/**
 * The Responses socket's pieces alone: a create event made into the body sent upstream
 * (src/apis/responses/socket-create.ts), and an exchange's answer, as the relays write it, made
 * into WebSocket messages (daemon/data-plane/socket-response.ts).
 */
import { describe, expect, it } from 'vitest';
import { type Turn, readCreateEvent, turnOf, warmupAnswer } from '../../src/apis/responses/socket-create.js';
import { ObProxyError } from '../../src/errors.js';
import { type MessageSink, SocketResponse } from '../../daemon/data-plane/socket-response.js';

const read = (event: unknown, last: Turn | null = null) => readCreateEvent(Buffer.from(JSON.stringify(event)), last);
const refusal = (event: unknown, last: Turn | null = null): unknown => {
  try {
    read(event, last);
  } catch (err) {
    if (err instanceof ObProxyError) return [err.code, err.param];
    throw err;
  }
  return null;
};

describe('a create event', () => {
  it('is the Responses body in its own key order, streamed, without what only the socket reads', () => {
    const e = read({ type: 'response.create', model: 'm', stream: false, input: 'hi', generate: true, temperature: 0 });
    expect(e).toEqual({
      body: { model: 'm', input: 'hi', temperature: 0, stream: true },
      previous: null,
      warmup: false,
    });
    expect(Object.keys(e.body)).toEqual(['model', 'input', 'temperature', 'stream']);
    expect(read({ type: 'response.create', model: 'm', generate: false }).warmup).toBe(true);
  });

  it('continues the turn it names: its items, then the new input', () => {
    const last: Turn = { id: 'resp_1', items: [{ a: 1 }, { b: 2 }], bytes: 10 };
    const items = [{ type: 'message', role: 'user', content: 'x' }];
    expect(
      read({ type: 'response.create', model: 'm', previous_response_id: 'resp_1', input: items }, last).body,
    ).toEqual({ model: 'm', input: [{ a: 1 }, { b: 2 }, ...items], stream: true });
    expect(read({ type: 'response.create', model: 'm', previous_response_id: 'resp_1' }, last).body.input).toEqual([
      { a: 1 },
      { b: 2 },
    ]);
    // A null id is a fresh start, as OpenAI documents it.
    expect(read({ type: 'response.create', model: 'm', previous_response_id: null, input: 'x' }, last)).toMatchObject({
      previous: null,
      body: { input: 'x' },
    });
    expect(refusal({ type: 'response.create', previous_response_id: 'resp_2' }, last)).toEqual([
      'previous_response_not_found',
      'previous_response_id',
    ]);
    expect(refusal({ type: 'response.create', previous_response_id: 'resp_1' }, null)).toEqual([
      'previous_response_not_found',
      'previous_response_id',
    ]);
  });

  it("a response's turn is its input then its output; Ollama's null output is none", () => {
    const out = [{ type: 'message', role: 'assistant', content: [] }];
    expect(turnOf('resp_1', 'hi', { output: out }, 9)).toEqual({
      id: 'resp_1',
      items: [{ type: 'message', role: 'user', content: 'hi' }, ...out],
      bytes: 9,
    });
    expect(turnOf('resp_2', [{ a: 1 }], { output: null }, 9)?.items).toEqual([{ a: 1 }]);
    expect(turnOf('resp_3', [], { output: 'no' }, 9)).toBeNull();
  });

  it('refuses what it cannot read, naming the field', () => {
    expect(refusal({ type: 'response.append' })).toEqual(['invalid_request', 'type']);
    expect(refusal({ model: 'm' })).toEqual(['invalid_request', 'type']);
    expect(refusal({ type: 'response.create', background: true })).toEqual(['invalid_request', 'background']);
    expect(refusal({ type: 'response.create', generate: 'no' })).toEqual(['invalid_request', 'generate']);
    expect(refusal({ type: 'response.create', previous_response_id: 7 })).toEqual([
      'invalid_request',
      'previous_response_id',
    ]);
    expect(refusal({ type: 'response.create', TYPE: 'x' })).toEqual(['invalid_json', 'TYPE']);
    expect(refusal({ type: 'response.create', Previous_Response_Id: 'x' })).toEqual([
      'invalid_json',
      'Previous_Response_Id',
    ]);
  });

  it('a warm-up is answered with the response created and completed, empty', () => {
    const text = warmupAnswer('resp_w', 'm', { model: 'm', instructions: 'be brief' }, Date.UTC(2026, 10, 23));
    const frames = text.split('\n\n').filter((f) => f !== '');
    expect(frames.map((f) => f.split('\n')[0])).toEqual(['event: response.created', 'event: response.completed']);
    const completed = JSON.parse(frames[1]!.split('\n')[1]!.slice(6)) as Record<string, Record<string, unknown>>;
    expect(completed).toMatchObject({ type: 'response.completed', sequence_number: 1 });
    expect(completed.response).toMatchObject({
      id: 'resp_w',
      status: 'completed',
      output: [],
      instructions: 'be brief',
      completed_at: Date.UTC(2026, 10, 23) / 1000,
    });
  });
});

function sink(): MessageSink & { sent: string[]; pending: (() => void)[]; bytes: number } {
  const s = {
    sent: [] as string[],
    pending: [] as (() => void)[],
    bytes: 0,
    send(text: string, done: () => void) {
      s.sent.push(text);
      s.bytes += text.length;
      s.pending.push(() => {
        s.bytes -= text.length;
        done();
      });
    },
    get buffered() {
      return s.bytes;
    },
  };
  return s;
}

describe('an answer as messages', () => {
  it('sends each event’s data as one message, frames split across writes or several in one', () => {
    const out = sink();
    const names: string[] = [];
    const res = new SocketResponse(out, (name, data) => (names.push(name), data));
    res.writeHead(200);
    res.write('event: response.created\ndata: {"type":"response.created"}\n\nevent: response.output_text.de');
    res.write(Buffer.from('lta\ndata: {"type":"response.output_text.delta",\ndata: "delta":"a"}\n\n'));
    res.end('event: response.completed\ndata: {"type":"response.completed"}\n\n');
    expect(out.sent).toEqual([
      '{"type":"response.created"}',
      '{"type":"response.output_text.delta",\n"delta":"a"}',
      '{"type":"response.completed"}',
    ]);
    expect(names).toEqual(['response.created', 'response.output_text.delta', 'response.completed']);
    expect(res.writableFinished).toBe(true);
  });

  it('an error answered with a status is the error event, whatever its body', () => {
    const out = sink();
    const res = new SocketResponse(out, (_n, d) => d);
    res.writeHead(401);
    res.end('{"error":{"message":"no","type":"authentication_error","code":"revoked_api_key","param":null}}');
    const other = new SocketResponse(out, (_n, d) => d);
    other.writeHead(502);
    other.end('Bad Gateway');
    expect(out.sent.map((t) => JSON.parse(t) as unknown)).toEqual([
      {
        type: 'error',
        status: 401,
        error: { message: 'no', type: 'authentication_error', code: 'revoked_api_key', param: null },
      },
      { type: 'error', status: 502, error: { message: 'Bad Gateway', type: 'api_error', code: null, param: null } },
    ]);
  });

  it('says "wait" past its high-water mark, and drains when the client has read', () => {
    const out = sink();
    const res = new SocketResponse(out, (_n, d) => d);
    res.writeHead(200);
    let drained = 0;
    res.on('drain', () => drained++);
    const big = `data: "${'x'.repeat(70 * 1024)}"\n\n`;
    expect(res.write(big)).toBe(false);
    for (const done of out.pending.splice(0)) done();
    expect(drained).toBe(1);
    expect(res.write('data: 1\n\n')).toBe(true);
  });

  it('closes once, after the answer or when its client left', async () => {
    const out = sink();
    const res = new SocketResponse(out, (_n, d) => d);
    const closes: boolean[] = [];
    res.on('close', () => closes.push(res.writableFinished));
    res.destroy();
    res.destroy();
    expect(res.write('data: 1\n\n')).toBe(false);
    await new Promise((r) => process.nextTick(r));
    expect(closes).toEqual([false]);
    expect(out.sent).toEqual([]);
  });
});
