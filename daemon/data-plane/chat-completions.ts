import { completionId } from '../../src/ids.js';
import { type ChatRequest, parseChatBody, upstreamBody, validateChatRequest } from '../../src/apis/chat/request.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import { type ProxyDeps, makeProxyHandler } from './proxied-route.js';
import { type WireApi } from './wire-api.js';
import { PlainAnswer } from './plain-relay.js';
import { StreamAnswer } from './stream-relay.js';

/** POST /v1/chat/completions: the request of docs/contract.md §3.2, the answer of §3.3, streams relayed frame by frame. */
export const CHAT_API: WireApi<ChatRequest> = {
  route: 'chat',
  logMessage: 'chat completion',
  upstreamPath: '/v1/chat/completions',
  parse: parseChatBody,
  validate: validateChatRequest,
  upstream(raw, chat) {
    const body = upstreamBody(raw, chat);
    // Held while the request waits: the rewritten tree is let go once it is bytes (body-reader.ts).
    chat.rewritten = null;
    return body;
  },
  newId: completionId,
  answer(ctx, rc, chat, deployment) {
    if (!chat.stream) return new PlainAnswer();
    const layouts = ctx.config.relayFastPath ? ctx.eventLayouts.for(deployment) : null;
    return new StreamAnswer(new SseRelay(rc.id, chat.includeUsage, layouts, rc.limits.maxFrameBytes, rc.upstreamToken));
  },
  support: null,
  fallback: null,
};

export function makeChatHandler(ctx: ProxyDeps) {
  return makeProxyHandler(ctx, CHAT_API);
}
