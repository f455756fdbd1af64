import { textCompletionId } from '../../src/ids.js';
import { MAX_CHOICES, usageOf } from '../../src/wire/chat-response.js';
import { upstreamBody } from '../../src/apis/chat/request.js';
import { CompletionsStreamRelay } from '../../src/apis/completions/stream.js';
import {
  type CompletionsRequest,
  parseCompletionsBody,
  validateCompletionsRequest,
} from '../../src/apis/completions/request.js';
import { withTopId } from '../../src/wire/top-id.js';
import type { DaemonBasics } from '../context.js';
import { type ProxyDeps, makeProxyHandler } from './proxied-route.js';
import { type WireApi } from './wire-api.js';
import { RouteSupport } from './route-support.js';
import { PlainAnswer, type PlainShape } from './plain-relay.js';
import { StreamAnswer } from './stream-relay.js';

/**
 * A plain legacy completion: the model server's answer with our `cmpl-` id, as it sent it
 * otherwise. Usage from its `usage` (`prompt_tokens`, `completion_tokens`).
 */
export const completionShape: PlainShape = (raw, text, parsed, answer) => {
  const body = parsed as Record<string, unknown> | null;
  if (
    typeof body !== 'object' ||
    body === null ||
    Array.isArray(body) ||
    !Array.isArray(body.choices) ||
    body.choices.length > MAX_CHOICES
  ) {
    answer.notAnAnswer('a text completion');
    return;
  }
  const out = withTopId(raw, text, body, answer.relay.c.id);
  if (out === null) {
    answer.tooDeep();
    return;
  }
  const usage = usageOf(body);
  answer.send(out, body, usage.prompt, usage.completion, usage.reasoning);
};

/** POST /v1/completions, legacy text completions, passed through to the model server's own (docs/contract.md §6). */
export function completionsApi(ctx: Pick<DaemonBasics, 'clock'>): WireApi<CompletionsRequest> {
  return {
    route: 'completions',
    logMessage: 'text completion',
    upstreamPath: '/v1/completions',
    parse: parseCompletionsBody,
    validate: validateCompletionsRequest,
    upstream: upstreamBody,
    newId: textCompletionId,
    answer(_ctx, rc, req) {
      if (!req.stream) return new PlainAnswer(completionShape);
      // Chat's layouts know chat's events only: every completion event takes the parsed path.
      return new StreamAnswer(
        new CompletionsStreamRelay(rc.id, req.includeUsage, null, rc.limits.maxFrameBytes, rc.upstreamToken),
      );
    },
    support: new RouteSupport('POST /v1/completions', ctx.clock),
    fallback: null,
  };
}

export function makeCompletionsHandler(ctx: ProxyDeps) {
  return makeProxyHandler(ctx, completionsApi(ctx));
}
