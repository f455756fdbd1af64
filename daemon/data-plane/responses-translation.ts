import { encodeJson, usageOf } from '../../src/wire/chat-response.js';
import { chatToResponse } from '../../src/apis/responses/from-chat.js';
import { type ResponseContext, randomIds, unixSeconds } from '../../src/apis/responses/object.js';
import type { ResponsesRequest } from '../../src/apis/responses/request.js';
import { type ChatTranslation, responsesToChat } from '../../src/apis/responses/to-chat.js';
import { TranslatedResponsesStream } from '../../src/apis/responses/translated-stream.js';
import type { Resend, Route } from './wire-api.js';
import { PlainAnswer, type PlainShape } from './plain-relay.js';
import { StreamAnswer } from './stream-relay.js';

type Json = Record<string, unknown>;

/**
 * Codex CLI, and other agents, send tools the model server cannot run (`web_search`,
 * `namespace`, `custom`, …) with every request: refused, no turn of theirs would ever be served.
 * A model server's own /v1/responses offers the model only function tools too, so leaving the
 * others out answers as it would (docs/compatibility.md).
 */
const OTHER_TOOLS = 'drop';

/**
 * A plain Responses answer translated from the model server's chat completion: the Responses
 * object a server's own /v1/responses would have written (apis/responses/from-chat.ts), with our id and
 * Ollama's trailing newline. Usage from the completion's (`prompt_tokens`, `completion_tokens`).
 */
function translatedShape(response: ResponseContext): PlainShape {
  return (_raw, _text, parsed, answer) => {
    const body = chatToResponse(parsed, response);
    if (body === null) {
      answer.notAnAnswer('a chat completion');
      return;
    }
    const encoded = encodeJson(body);
    if (encoded === null) {
      answer.tooDeep();
      return;
    }
    const usage = usageOf(parsed as Json);
    answer.write(`${encoded}\n`, usage.prompt, usage.completion, usage.reasoning);
  };
}

/** The way of a Responses request translated to chat completions: its path and the relays that translate the answer back. */
function translatedRoute(t: ChatTranslation): Route<ResponsesRequest> {
  return {
    upstreamPath: '/v1/chat/completions',
    answer(_ctx, rc, req) {
      const response: ResponseContext = {
        responseId: rc.id,
        model: rc.model,
        echo: t.echo,
        createdAt: unixSeconds(rc.clock),
        clock: rc.clock,
        ids: randomIds,
      };
      if (!req.stream) return new PlainAnswer(translatedShape(response));
      return new StreamAnswer(
        new TranslatedResponsesStream(response, rc.limits.maxFrameBytes, rc.limits.maxAnswerBytes),
        'sse',
        false,
      );
    },
  };
}

/**
 * A Responses request as a chat completions request (apis/responses/to-chat.ts), for a model server
 * that serves only `/v1/chat/completions`; throws 400 naming the field for what has no chat form.
 */
export function translateResponses(req: ResponsesRequest): Resend<ResponsesRequest> {
  const t = responsesToChat(req.body, { otherTools: OTHER_TOOLS });
  return { body: JSON.stringify(t.chat), route: translatedRoute(t) };
}
