/* global process, console, setTimeout, Buffer */
/**
 * The benchmark's upstream: a fixed-body stand-in for Ollama's OpenAI-compatible API, as cheap
 * as Node can make it, so that what the bench measures is the proxy and not the model server.
 * Bodies are built once. The request body is read (a proxy must deliver it) but not parsed:
 * `"stream":true` picks SSE, `"include_usage":true` adds the usage chunk, and a `[[chunks=N
 * pace=MS]]` directive near the end of the body sets the stream's length and pacing.
 * `POST /v1/responses` answers as Ollama's does: the response object, or its event stream (data
 * keys sorted, as Go writes a map; one `response.output_text.delta` per token; no `[DONE]`).
 * `POST /v1/messages` answers as Ollama's Anthropic API does: the message, or its event stream
 * (`event:` lines, one `content_block_delta` per token, `message_stop` last).
 *
 * Usage: node bench/upstream.mjs [--chunks 64] [--host 127.0.0.1]   prints {"url": "..."} once listening.
 * `--host 0.0.0.0` answers on every loopback address too (127.x.y.z): many endpoints, one process.
 */
import { createServer } from 'node:http';

const argChunks = process.argv.indexOf('--chunks');
const DEFAULT_CHUNKS = argChunks === -1 ? 64 : Number(process.argv[argChunks + 1]);
const argHost = process.argv.indexOf('--host');
const HOST = argHost === -1 ? '127.0.0.1' : process.argv[argHost + 1];
const MODEL = 'gemma4:26b';
const CREATED = Math.floor(Date.now() / 1000);

const PLAIN = Buffer.from(
  JSON.stringify({
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: CREATED,
    model: MODEL,
    system_fingerprint: 'fp_ollama',
    choices: [
      {
        index: 0,
        message: { role: 'assistant', content: 'The quick brown fox jumps over the lazy dog. '.repeat(4) },
        finish_reason: 'stop',
      },
    ],
    usage: { prompt_tokens: 24, completion_tokens: 40, total_tokens: 64 },
  }),
);
const HEAD = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":${CREATED},"model":"${MODEL}","system_fingerprint":"fp_ollama","choices":`;
/** Content frame i carries the token `t<i> `, so a client can check order and completeness. */
const frame = (i) => `${HEAD}[{"index":0,"delta":{"role":"assistant","content":"t${i} "},"finish_reason":null}]}\n\n`;
const FRAMES = Array.from({ length: 4096 }, (_, i) => frame(i));
const STOP = `${HEAD}[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n`;
const usageFrame = (n) =>
  `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":${CREATED},"model":"${MODEL}","choices":[],"usage":{"prompt_tokens":24,"completion_tokens":${n},"total_tokens":${24 + n}}}\n\n`;
const DONE = 'data: [DONE]\n\n';
/** Keys sorted at every level, as Go's encoder writes a map[string]any. */
function sortedJson(v) {
  if (Array.isArray(v)) return `[${v.map(sortedJson).join(',')}]`;
  if (typeof v === 'object' && v !== null)
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${sortedJson(v[k])}`)
      .join(',')}}`;
  return JSON.stringify(v);
}
const TEXT = 'The quick brown fox jumps over the lazy dog. '.repeat(4);
const outputText = (text) => ({ type: 'output_text', text, annotations: [], logprobs: [] });
const message = (status, content) => ({ id: 'msg_123456', type: 'message', status, role: 'assistant', content });
const responseObject = (status, output, usage) => ({
  id: 'resp_123456',
  object: 'response',
  created_at: CREATED,
  completed_at: status === 'completed' ? CREATED : null,
  status,
  incomplete_details: null,
  model: MODEL,
  previous_response_id: null,
  instructions: null,
  output,
  error: null,
  tools: [],
  tool_choice: 'auto',
  truncation: 'disabled',
  parallel_tool_calls: true,
  text: { format: { type: 'text' } },
  top_p: 1,
  temperature: 1,
  reasoning: null,
  usage:
    usage === null
      ? null
      : {
          input_tokens: 24,
          output_tokens: usage,
          total_tokens: 24 + usage,
          input_tokens_details: { cached_tokens: 0 },
          output_tokens_details: { reasoning_tokens: 0 },
        },
  max_output_tokens: null,
  store: false,
  metadata: {},
});
const RESPONSE_PLAIN = Buffer.from(
  `${JSON.stringify(responseObject('completed', [message('completed', [outputText(TEXT)])], 40))}\n`,
);
const RESPONSE_JSON_HEADERS = { 'content-type': 'application/json', 'content-length': String(RESPONSE_PLAIN.length) };
/** The Responses event stream of `chunks` tokens `t<i> `, as whole frames. */
function responseFrames(chunks) {
  const out = [];
  const ev = (type, data) =>
    out.push(`event: ${type}\ndata: ${sortedJson({ ...data, type, sequence_number: out.length })}\n\n`);
  const ids = { output_index: 0, item_id: 'msg_123456', content_index: 0 };
  ev('response.created', { response: responseObject('in_progress', [], null) });
  ev('response.in_progress', { response: responseObject('in_progress', [], null) });
  ev('response.output_item.added', { output_index: 0, item: message('in_progress', []) });
  ev('response.content_part.added', { ...ids, part: outputText('') });
  let text = '';
  for (let i = 0; i < chunks; i++) {
    ev('response.output_text.delta', { ...ids, delta: `t${i} `, logprobs: [] });
    text += `t${i} `;
  }
  ev('response.output_text.done', { ...ids, text, logprobs: [] });
  ev('response.content_part.done', { ...ids, part: outputText(text) });
  ev('response.output_item.done', { output_index: 0, item: message('completed', [outputText(text)]) });
  ev('response.completed', {
    response: responseObject('completed', [message('completed', [outputText(text)])], chunks),
  });
  return out;
}
const RESPONSE_FRAMES = new Map();
function responseStream(res, body) {
  const { chunks } = directive(body);
  let frames = RESPONSE_FRAMES.get(chunks);
  if (frames === undefined) RESPONSE_FRAMES.set(chunks, (frames = responseFrames(chunks)));
  res.writeHead(200, SSE_HEADERS);
  for (let i = 0; i < frames.length - 1; i++) res.write(frames[i]);
  res.end(frames[frames.length - 1]);
}
const MESSAGE_PLAIN = Buffer.from(
  JSON.stringify({
    id: 'msg_bench',
    type: 'message',
    role: 'assistant',
    model: MODEL,
    content: [{ type: 'text', text: TEXT }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 24, output_tokens: 40 },
  }),
);
const MESSAGE_JSON_HEADERS = { 'content-type': 'application/json', 'content-length': String(MESSAGE_PLAIN.length) };
/** The Messages event stream of `chunks` tokens `t<i> `, as whole frames. */
function messageFrames(chunks) {
  const out = [];
  const ev = (type, data) => out.push(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  ev('message_start', {
    message: {
      id: 'msg_bench',
      type: 'message',
      role: 'assistant',
      model: MODEL,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 24, output_tokens: 0 },
    },
  });
  ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
  for (let i = 0; i < chunks; i++)
    ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: `t${i} ` } });
  ev('content_block_stop', { index: 0 });
  ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: chunks } });
  ev('message_stop', {});
  return out;
}
const MESSAGE_FRAMES = new Map();
function messageStream(res, body) {
  const { chunks } = directive(body);
  let frames = MESSAGE_FRAMES.get(chunks);
  if (frames === undefined) MESSAGE_FRAMES.set(chunks, (frames = messageFrames(chunks)));
  res.writeHead(200, SSE_HEADERS);
  for (let i = 0; i < frames.length - 1; i++) res.write(frames[i]);
  res.end(frames[frames.length - 1]);
}
const SSE_HEADERS = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' };
const JSON_HEADERS = { 'content-type': 'application/json', 'content-length': String(PLAIN.length) };

function directive(body) {
  const at = body.lastIndexOf('[[chunks=');
  if (at === -1) return { chunks: DEFAULT_CHUNKS, pace: 0 };
  const m = /^\[\[chunks=(\d+)(?: pace=(\d+))?\]\]/.exec(body.slice(at, at + 40));
  return m === null
    ? { chunks: DEFAULT_CHUNKS, pace: 0 }
    : { chunks: Math.min(Number(m[1]), FRAMES.length), pace: Number(m[2] ?? 0) };
}

function stream(res, body) {
  const { chunks, pace } = directive(body);
  const usage = body.includes('"include_usage":true');
  res.writeHead(200, SSE_HEADERS);
  const finish = () => {
    res.write(STOP);
    if (usage) res.write(usageFrame(chunks));
    res.end(DONE);
  };
  if (pace === 0) {
    // As fast as possible, one write per token as a model server does.
    for (let i = 0; i < chunks; i++) res.write(FRAMES[i]);
    finish();
    return;
  }
  let i = 0;
  const tick = () => {
    if (res.destroyed) return;
    if (i === chunks) return finish();
    res.write(FRAMES[i++]);
    setTimeout(tick, pace);
  };
  tick();
}

const server = createServer({ keepAliveTimeout: 60_000 }, (req, res) => {
  const parts = [];
  req.on('data', (c) => parts.push(c));
  req.on('end', () => {
    // As Ollama and vLLM do: `instances ready` asks which models are served.
    if (req.method === 'GET' && req.url === '/v1/models') {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end('{"object":"list","data":[{"id":"gemma4:26b","object":"model","created":0,"owned_by":"library"}]}');
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(404).end();
      return;
    }
    const body = parts.length === 1 ? parts[0].toString('latin1') : Buffer.concat(parts).toString('latin1');
    if (req.url === '/v1/responses') {
      if (body.includes('"stream":true')) responseStream(res, body);
      else res.writeHead(200, RESPONSE_JSON_HEADERS).end(RESPONSE_PLAIN);
      return;
    }
    if (req.url === '/v1/messages') {
      if (body.includes('"stream":true')) messageStream(res, body);
      else res.writeHead(200, MESSAGE_JSON_HEADERS).end(MESSAGE_PLAIN);
      return;
    }
    if (body.includes('"stream":true')) stream(res, body);
    else res.writeHead(200, JSON_HEADERS).end(PLAIN);
  });
});
server.maxRequestsPerSocket = 0;
server.headersTimeout = 0;
server.requestTimeout = 0;
server.listen(0, HOST, () => {
  console.log(JSON.stringify({ url: `http://127.0.0.1:${server.address().port}` }));
});
process.on('SIGTERM', () => process.exit(0));
