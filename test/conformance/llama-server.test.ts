/**
 * The gateway in front of llama.cpp's `llama-server` (b9436, the engine Ollama runs), one server
 * per chat template, with the openai SDK, the AI SDK and LangChain; the differential test;
 * revocation, a client that leaves, and its mid-stream `{"error":…}` event.
 */
import { GEMMA, GET_TIME, GET_WEATHER, QWEN } from '../helpers/conformance-cases.js';
import { conformanceSuite } from '../helpers/conformance-suite.js';
import { startLlamaServer } from '../helpers/realup.js';

conformanceSuite({
  name: 'llama.cpp llama-server',
  async start() {
    // Two slots of the model's whole context each: room for the long replies of the cancellation tests.
    const [gemma, qwen] = await Promise.all([
      startLlamaServer({ alias: GEMMA, ctx: 65536, slots: 2 }),
      startLlamaServer({ alias: QWEN, gemma4: true, ctx: 65536, slots: 2 }),
    ]);
    return { gemma, qwen };
  },
  text: { model: GEMMA, messages: [{ role: 'user', content: 'Hello' }], temperature: 1, seed: 7, max_tokens: 12 },
  // tool_choice "required" makes a grammar that forces a call; this seed closes it early.
  tools: {
    model: GEMMA,
    messages: [{ role: 'user', content: 'What time is it?' }],
    tools: [GET_TIME],
    tool_choice: 'required',
    temperature: 1,
    seed: 3,
    max_tokens: 200,
  },
  reasoning: {
    model: QWEN,
    messages: [{ role: 'user', content: 'Hello' }],
    temperature: 1,
    seed: 3,
    max_tokens: 40,
    field: 'reasoning_content',
  },
  // The Gemma 4 tool-call parser fails on what this seed makes the model write: a 500 plain, and
  // mid-stream a `data: {"error":…}` event with no finish chunk and no [DONE].
  failure: {
    model: QWEN,
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
    tools: [GET_WEATHER],
    tool_choice: 'required',
    temperature: 1,
    seed: 21,
    max_tokens: 150,
  },
  failureEnd: 'error-event',
  routes: ['responses', 'completions'],
  longTokens: 32000,
});
