/**
 * A Responses request's parts as the translation tests send them: the model's name and a
 * function tool (get_weather, strict, with its JSON schema).
 */

export const MODEL = 'gemma4:26b';

export const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'Weather of a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  strict: true,
};
