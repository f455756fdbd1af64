/**
 * What the conformance suite sends to a real model server: the models, the tools and formats, a
 * server's profile (the requests chosen for what its model does), and the differential cases.
 */
import type { RealServer } from './realup.js';
import { ROUTES, type RouteSpec } from './wire-exchange.js';

export type Body = Record<string, unknown>;

export const GEMMA = 'gemma4:26b';
export const QWEN = 'qwen3.6:27b';

/** A tool without arguments: a grammar-free model closes its call quickly. */
export const GET_TIME = {
  type: 'function',
  function: { name: 'get_time', description: 'The time now', parameters: { type: 'object', properties: {} } },
} as const;

export const GET_WEATHER = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
} as const;

export const JSON_SCHEMA_FORMAT = {
  type: 'json_schema',
  json_schema: {
    name: 'answer',
    schema: { type: 'object', properties: { ok: { type: 'boolean' } }, required: ['ok'], additionalProperties: false },
  },
} as const;

/**
 * A reply that runs to `max_tokens`: the grammar of a lowercase string never lets the model end
 * it, and has no `"` to close it (the tiny models stop on their own after a few dozen tokens).
 */
export const ENDLESS_FORMAT = {
  type: 'json_schema',
  json_schema: { name: 'letters', schema: { type: 'string', pattern: '^[a-z]*$' } },
} as const;

/** A one-message chat request to `model`. */
export const hello = (model: string, extra: Body = {}): Body => ({
  model,
  messages: [{ role: 'user', content: 'Hello' }],
  ...extra,
});

/** The requests of a server's profile, each chosen (seed) for what its model does with it. */
export interface Profile {
  readonly name: string;
  /** The servers for GEMMA (Qwen2.5 chat template) and QWEN (Gemma 4 chat template); may be one. */
  start(): Promise<{ gemma: RealServer; qwen: RealServer }>;
  /** GEMMA, sampled with a seed: a few words of text. */
  readonly text: Body;
  /** GEMMA, `tools` with `tool_choice: "required"`: at least one call, finish `tool_calls`. */
  readonly tools: Body;
  /** QWEN: an answer with reasoning (the field the server names it). */
  readonly reasoning: Body & { field: 'reasoning' | 'reasoning_content' };
  /** A request whose stream the server ends in its own failure mode. */
  readonly failure: Body;
  /** How the server ends `failure`'s stream. */
  readonly failureEnd: 'stops' | 'error-event';
  /**
   * `max_tokens` for a reply that runs long (within one slot's context): seconds of generation, so
   * that a cancellation reaches the server while it still generates, however loaded the machine.
   */
  readonly longTokens: number;
  /** The other client APIs the server serves itself. */
  readonly routes: readonly OtherRoute[];
}

export type OtherRoute = 'responses' | 'completions' | 'messages';

/** Each request the differential test sends straight and through the gateway, plain and streamed. */
export interface DiffCase {
  readonly name: string;
  readonly route: RouteSpec;
  readonly body: Body;
}

export function diffCases(p: Profile): DiffCase[] {
  const toolTurn: Body = {
    ...p.tools,
    tool_choice: 'auto',
    temperature: 0,
    max_tokens: 20,
    messages: [
      { role: 'user', content: 'What time is it?' },
      {
        role: 'assistant',
        content: '',
        tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_time', arguments: '{}' } }],
      },
      { role: 'tool', tool_call_id: 'call_1', content: '12:00' },
    ],
  };
  const { field: _field, ...reasoning } = p.reasoning;
  return [
    { name: 'greedy text', route: ROUTES.chat, body: hello(GEMMA, { temperature: 0, seed: 1, max_tokens: 12 }) },
    { name: 'seeded text', route: ROUTES.chat, body: p.text },
    { name: 'tool call (tool_choice required)', route: ROUTES.chat, body: p.tools },
    { name: 'tool-result turn', route: ROUTES.chat, body: toolTurn },
    {
      name: 'json_schema',
      route: ROUTES.chat,
      body: hello(GEMMA, { temperature: 0, seed: 1, max_tokens: 40, response_format: JSON_SCHEMA_FORMAT }),
    },
    { name: 'reasoning (Gemma 4 template)', route: ROUTES.chat, body: reasoning },
  ];
}

/** The other client APIs, for the routes the server serves: greedy text, plain and streamed. */
export function otherRouteCases(p: Profile): DiffCase[] {
  const all: Record<OtherRoute, DiffCase> = {
    responses: {
      name: 'Responses API',
      route: ROUTES.responses,
      body: { model: GEMMA, input: 'Hello', temperature: 0, max_output_tokens: 12 },
    },
    completions: {
      name: 'legacy completions',
      route: ROUTES.completions,
      body: { model: GEMMA, prompt: 'Hello', temperature: 0, seed: 1, max_tokens: 12 },
    },
    messages: {
      name: 'Messages',
      route: ROUTES.messages,
      body: { model: GEMMA, max_tokens: 12, temperature: 0, messages: [{ role: 'user', content: 'Hello' }] },
    },
  };
  return p.routes.map((r) => all[r]);
}
