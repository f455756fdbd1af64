/**
 * What a translated answer should be in the Responses shape: `response(over)` is the whole
 * Responses object of an answer to PLAIN with `over` replacing fields; `usage`, `message`,
 * `reasoning` and `call` its parts; PLAIN and WITH_TOOLS (the get_weather tool) the requests.
 */
import { CREATED_AT } from './responses-translate.js';

type Json = Record<string, unknown>;

export const PLAIN = { model: 'gemma4:26b', input: 'Say hello' };
export const WEATHER_TOOL = {
  type: 'function',
  name: 'get_weather',
  description: 'Weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } } },
  strict: false,
};
export const WITH_TOOLS = { model: 'gemma4:26b', input: 'Weather in Oslo and Bergen?', tools: [WEATHER_TOOL] };

/** The Responses object of a translated answer to PLAIN, with `over` replacing fields. */
export function response(over: Json): Json {
  return {
    id: 'resp_test',
    object: 'response',
    created_at: CREATED_AT,
    completed_at: CREATED_AT + 7,
    status: 'completed',
    incomplete_details: null,
    model: 'gemma4:26b',
    previous_response_id: null,
    instructions: null,
    output: [],
    error: null,
    tools: [],
    tool_choice: 'auto',
    truncation: 'disabled',
    parallel_tool_calls: true,
    text: { format: { type: 'text' } },
    top_p: 1,
    presence_penalty: 0,
    frequency_penalty: 0,
    top_logprobs: 0,
    temperature: 1,
    reasoning: null,
    usage: null,
    max_output_tokens: null,
    max_tool_calls: null,
    store: false,
    background: false,
    service_tier: 'default',
    metadata: {},
    safety_identifier: null,
    prompt_cache_key: null,
    ...over,
  };
}

export function usage(input: number, output: number, reasoning = 0, cached = 0): Json {
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output,
  };
}

export function text(t: string): Json {
  return { type: 'output_text', text: t, annotations: [], logprobs: [] };
}

export function message(id: string, t: string, status = 'completed'): Json {
  return { id, type: 'message', status, role: 'assistant', content: [text(t)] };
}

export function reasoning(id: string, t: string): Json {
  return { id, type: 'reasoning', summary: [{ type: 'summary_text', text: t }], encrypted_content: t };
}

export function call(id: string, callId: string, args: string, status = 'completed'): Json {
  return { id, type: 'function_call', status, call_id: callId, name: 'get_weather', arguments: args };
}
