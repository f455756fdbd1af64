/**
 * The scenarios of `npm run bench`, and the request bodies they send. `tool` says which load generator
 * measures it: wrk (when installed) for throughput and latency, the bench's own loadgen for
 * what wrk cannot see (time to first chunk, chunk order, held streams).
 */

const MODEL = 'gemma4:26b';

export function bodies({ heldChunks = 20, heldPaceMs = 300 } = {}) {
  const turn = (i) => ({
    role: i % 2 === 0 ? 'user' : 'assistant',
    content: `Turn ${i}: ${'lorem ipsum dolor sit amet '.repeat(150)}`,
  });
  const large = { model: MODEL, messages: Array.from({ length: 50 }, (_, i) => turn(i)) };
  large.messages.push({ role: 'user', content: 'Summarise the conversation.' });
  return {
    plain: JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Say hello.' }] }),
    stream: JSON.stringify({ model: MODEL, stream: true, messages: [{ role: 'user', content: 'Say hello.' }] }),
    // Paced: 16 chunks 5 ms apart, so every chunk must reach the client on its own.
    paced: JSON.stringify({
      model: MODEL,
      stream: true,
      messages: [{ role: 'user', content: 'Say hello. [[chunks=16 pace=5]]' }],
    }),
    // Held: 2,000 of these at once, each alive for about 20 × 300 ms.
    slow: JSON.stringify({
      model: MODEL,
      stream: true,
      messages: [{ role: 'user', content: `Say hello. [[chunks=${heldChunks} pace=${heldPaceMs}]]` }],
    }),
    large: JSON.stringify(large),
    // The Responses API (POST /v1/responses), answered with as many text events as `stream`.
    responses: JSON.stringify({ model: MODEL, input: 'Say hello.' }),
    'responses-stream': JSON.stringify({ model: MODEL, stream: true, input: 'Say hello.' }),
    // Anthropic's Messages API (POST /v1/messages), answered with as many text deltas as `stream`.
    messages: JSON.stringify({ model: MODEL, max_tokens: 256, messages: [{ role: 'user', content: 'Say hello.' }] }),
    'messages-stream': JSON.stringify({
      model: MODEL,
      max_tokens: 256,
      stream: true,
      messages: [{ role: 'user', content: 'Say hello.' }],
    }),
  };
}

/** Repeated scenarios: measured `reps` times each, medians reported. */
export const SCENARIOS = [
  { id: 'plain-c1', title: 'Non-streaming, 1 connection (latency)', body: 'plain', connections: 1, tool: 'wrk' },
  { id: 'plain-c64', title: 'Non-streaming, 64 connections (throughput)', body: 'plain', connections: 64, tool: 'wrk' },
  {
    id: 'stream-c1',
    title: 'Streaming 64 chunks, 1 connection (time to first chunk, total)',
    body: 'stream',
    connections: 1,
    tool: 'loadgen',
    expectChunks: 64,
  },
  {
    id: 'stream-c64',
    title: 'Streaming 64 chunks, 64 connections (throughput)',
    body: 'stream',
    connections: 64,
    tool: 'wrk',
  },
  {
    id: 'large-c1',
    title: 'Large request body (200 KB of messages), 1 connection',
    body: 'large',
    connections: 1,
    tool: 'wrk',
  },
];

/** Run once per target: correctness of paced streams, and memory of many held streams. */
export const PACED = { id: 'stream-paced', body: 'paced', connections: 1, expectChunks: 16 };
export const HELD = { id: 'held-streams', body: 'slow' };
