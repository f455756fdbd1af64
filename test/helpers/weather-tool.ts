/**
 * The get_weather tool the agent tests offer the model, and the arguments the simulator calls it
 * with: a sample of its schema, SAMPLE_STRING (every escape a relay could get wrong) as the city.
 */
import type { ChatCompletionTool } from 'openai/resources/chat/completions';
import { SAMPLE_STRING } from '../../simulator/sim-agent.js';

export const WEATHER: {
  type: 'object';
  properties: Record<string, { type: 'string'; description: string }>;
  required: string[];
  additionalProperties: false;
} = {
  type: 'object',
  properties: { city: { type: 'string', description: 'The city' } },
  required: ['city'],
  additionalProperties: false,
};
export const TOOLS: ChatCompletionTool[] = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather for a city', parameters: WEATHER } },
];
export const ARGS = JSON.stringify({ city: SAMPLE_STRING });
