import { type Json, given, invalid, isObject, optionalString, requiredString } from '../../wire/request-checks.js';

/**
 * A Responses request's `instructions` and `input` items as chat turns, as Ollama's own
 * translation makes them (`openai/responses.go`): `instructions` a leading system turn, a
 * `function_call` item an assistant turn's tool call (consecutive calls, and calls after an
 * assistant message, one turn), a `function_call_output` a tool turn, a `reasoning` item the
 * `reasoning` of the assistant turn that follows it. A refusal is 400 `invalid_request` naming
 * the item's path (`input[2].content`) as `param`.
 */

const IMAGE_DETAIL = ['auto', 'low', 'high'];

function textOf(v: unknown, path: string): string {
  return requiredString(v, path, 'the text');
}

/** A message's `content` (a string, or input/output parts) as chat content: one string unless it holds images. */
function messageContent(content: unknown, path: string): string | Json[] {
  if (!given(content)) invalid(path, `${path} is required: a string or a list of content parts.`);
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) invalid(path, `${path} must be a string or a list of content parts.`);
  const parts: Json[] = [];
  let images = false;
  for (let j = 0; j < content.length; j++) {
    const part: unknown = content[j];
    const pp = `${path}[${j}]`;
    if (!isObject(part)) invalid(pp, `${pp} must be an object like {"type":"input_text","text":"…"}.`);
    switch (part.type) {
      case 'input_text':
      case 'output_text':
        parts.push({ type: 'text', text: textOf(part.text, `${pp}.text`) });
        break;
      case 'refusal':
        // Chat servers take no refusal part (Ollama refuses one): its text goes as text.
        parts.push({ type: 'text', text: requiredString(part.refusal, `${pp}.refusal`, 'the refusal text') });
        break;
      case 'input_image': {
        if (!given(part.image_url)) {
          invalid(
            `${pp}.image_url`,
            given(part.file_id)
              ? `${pp}.file_id is not served: this gateway has no file store. Send the image as a data URL in image_url.`
              : `${pp}.image_url is required: the image as a data URL ("data:image/png;base64,…").`,
          );
        }
        const url = requiredString(part.image_url, `${pp}.image_url`, 'the image as a data URL');
        const image: Json = { url };
        if (typeof part.detail === 'string' && IMAGE_DETAIL.includes(part.detail)) image.detail = part.detail;
        parts.push({ type: 'image_url', image_url: image });
        images = true;
        break;
      }
      case 'input_file':
        invalid(
          `${pp}.type`,
          `${pp}: file inputs are not served by this model server. Send the file's text as input_text.`,
        );
        break;
      default:
        invalid(
          `${pp}.type`,
          `${pp}.type ${JSON.stringify(part.type)} has no chat equivalent: send input_text, output_text, refusal or input_image parts.`,
        );
    }
  }
  if (images) return parts;
  // All text: one string, as Ollama's /v1/responses joins the parts of a message.
  let text = '';
  for (const p of parts) text += p.text as string;
  return text;
}

/** A function_call_output's `output`: a string, or text parts joined (chat tool turns carry text only). */
function toolOutput(output: unknown, path: string): string {
  if (typeof output === 'string') return output;
  if (!Array.isArray(output)) invalid(path, `${path} is required: the function's result as a string.`);
  let text = '';
  for (let j = 0; j < output.length; j++) {
    const part: unknown = output[j];
    const pp = `${path}[${j}]`;
    if (!isObject(part) || (part.type !== 'input_text' && part.type !== 'output_text'))
      invalid(
        pp,
        `${pp} must be {"type":"input_text","text":"…"}: a tool result reaches this model server as text only.`,
      );
    text += textOf(part.text, `${pp}.text`);
  }
  return text;
}

/** The text of a reasoning item passed back: its summary, its reasoning text, else its `encrypted_content` (in clear, as Ollama writes it). */
function reasoningText(item: Json, path: string): string {
  let text = '';
  for (const key of ['summary', 'content'] as const) {
    const list = item[key];
    if (!given(list)) continue;
    if (!Array.isArray(list)) invalid(`${path}.${key}`, `${path}.${key} must be a list of {"type","text"} parts.`);
    for (let j = 0; j < list.length; j++) {
      const part: unknown = list[j];
      if (!isObject(part)) invalid(`${path}.${key}[${j}]`, `${path}.${key}[${j}] must be an object with text.`);
      text += textOf(part.text, `${path}.${key}[${j}].text`);
    }
    if (text !== '') return text;
  }
  optionalString(item.encrypted_content, `${path}.encrypted_content`);
  return typeof item.encrypted_content === 'string' ? item.encrypted_content : '';
}

/**
 * A function_call item as a chat tool call. Its arguments go as the model wrote them (the model
 * server parses them); a call without `call_id` goes without an id, as Ollama's own translation
 * sends it, and a tool turn without one answers the call before it.
 */
function functionCall(item: Json, path: string): Json {
  optionalString(item.call_id, `${path}.call_id`);
  const name = requiredString(item.name, `${path}.name`, "the function's name");
  if (name === '') invalid(`${path}.name`, `${path}.name must not be empty.`);
  let args = requiredString(item.arguments, `${path}.arguments`, 'the arguments as a JSON string');
  if (args === '') args = '{}';
  const call: Json = { type: 'function', function: { name, arguments: args } };
  if (typeof item.call_id === 'string') call.id = item.call_id;
  return call;
}

function unknownItem(type: unknown, path: string): never {
  if (type === 'item_reference')
    invalid(
      `${path}.type`,
      `${path}: item_reference is not served: this gateway keeps no responses. Send the whole items (with store: false, SDKs send them).`,
    );
  if (!given(type))
    invalid(`${path}.type`, `${path}.type is required: message, function_call, function_call_output or reasoning.`);
  invalid(
    `${path}.type`,
    `${path}.type ${JSON.stringify(type)} is not served by this model server: send message, function_call, function_call_output or reasoning items.`,
  );
}

/** The chat turns of `instructions` and `input`. */
export function messagesOf(body: Json): Json[] {
  const messages: Json[] = [];
  const instructions = body.instructions;
  optionalString(instructions, 'instructions');
  if (typeof instructions === 'string' && instructions !== '') messages.push({ role: 'system', content: instructions });

  const input = body.input;
  if (!given(input)) invalid('input', 'input is required: a string or a list of items holding the whole conversation.');
  if (typeof input === 'string') {
    messages.push({ role: 'user', content: input });
    return messages;
  }
  if (!Array.isArray(input)) invalid('input', 'input must be a string or a list of items.');

  // Reasoning passed back goes with the assistant turn after it, as Ollama feeds thinking back.
  let reasoning = '';
  const withReasoning = (m: Json): Json => {
    if (reasoning !== '') m.reasoning = reasoning;
    reasoning = '';
    return m;
  };
  for (let i = 0; i < input.length; i++) {
    const item: unknown = input[i];
    const path = `input[${i}]`;
    if (!isObject(item))
      invalid(path, `${path} must be an object: a message, function_call or function_call_output item.`);
    // OpenAI's short form {role, content} is a message.
    const type = given(item.type) ? item.type : given(item.role) ? 'message' : undefined;
    switch (type) {
      case 'message': {
        const role = requiredString(item.role, `${path}.role`, 'who speaks: user, assistant, system or developer');
        const content = messageContent(item.content, `${path}.content`);
        // developer is system to every chat template (apis/chat/messages.ts sends it up as system too).
        const m: Json = { role: role === 'developer' ? 'system' : role, content };
        messages.push(role === 'assistant' ? withReasoning(m) : m);
        break;
      }
      case 'function_call': {
        const call = functionCall(item, path);
        const last = messages[messages.length - 1];
        if (last !== undefined && last.role === 'assistant') {
          // One assistant turn: its text, then every call it made.
          const calls = Array.isArray(last.tool_calls) ? (last.tool_calls as Json[]) : [];
          calls.push(call);
          last.tool_calls = calls;
          if (reasoning !== '') withReasoning(last);
        } else {
          messages.push(withReasoning({ role: 'assistant', content: null, tool_calls: [call] }));
        }
        break;
      }
      case 'function_call_output': {
        // Codex writes some outputs with a name and no call_id; chat's tool turn takes either.
        optionalString(item.call_id, `${path}.call_id`);
        const turn: Json = { role: 'tool', content: toolOutput(item.output, `${path}.output`) };
        if (typeof item.call_id === 'string') turn.tool_call_id = item.call_id;
        messages.push(turn);
        break;
      }
      case 'reasoning':
        reasoning = reasoningText(item, path);
        break;
      default:
        unknownItem(type, path);
    }
  }
  // Reasoning with no assistant turn after it says nothing to the model: it is left out.
  if (messages.length === 0) invalid('input', 'input must hold at least one message: the conversation to answer.');
  return messages;
}
