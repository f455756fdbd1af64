/**
 * The gateway in front of real Ollama (v0.33.0-rc2, the server instances run), with the openai
 * SDK, the AI SDK and LangChain; the differential test; revocation, a client that leaves, and
 * Ollama's stream that just stops when a tool call is cut by the token limit.
 */
import { GEMMA, GET_TIME, GET_WEATHER, QWEN } from '../helpers/conformance-cases.js';
import { conformanceSuite } from '../helpers/conformance-suite.js';
import { startOllama } from '../helpers/realup.js';

conformanceSuite({
  name: 'real Ollama',
  async start() {
    // The model's whole context: room for the long replies of the cancellation tests.
    const ollama = await startOllama({ ctx: 40960 });
    return { gemma: ollama, qwen: ollama };
  },
  text: { model: GEMMA, messages: [{ role: 'user', content: 'Hello' }], temperature: 1, seed: 7, max_tokens: 12 },
  // Ollama ignores tool_choice: this seed is one where the model calls the tool of its own accord.
  tools: {
    model: GEMMA,
    messages: [{ role: 'user', content: 'What time is it?' }],
    tools: [GET_TIME],
    tool_choice: 'required',
    temperature: 1,
    seed: 15,
    max_tokens: 300,
  },
  reasoning: {
    model: QWEN,
    messages: [{ role: 'user', content: 'Hello' }],
    temperature: 1,
    seed: 9,
    max_tokens: 60,
    field: 'reasoning',
  },
  // A call to get_weather cut by max_tokens: 500 plain, and a stream that ends without a word.
  failure: {
    model: GEMMA,
    messages: [{ role: 'user', content: 'Weather in Paris?' }],
    tools: [GET_WEATHER],
    temperature: 1,
    seed: 1,
    max_tokens: 100,
  },
  failureEnd: 'stops',
  routes: ['responses', 'completions', 'messages'],
  longTokens: 32000,
});
