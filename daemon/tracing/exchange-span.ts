/**
 * One request's span and what it records, by the GenAI semantic conventions (the version of
 * @opentelemetry/semantic-conventions this package depends on): `gen_ai.provider.name` (which
 * replaced `gen_ai.system`), operation, request and response model, usage, finish reasons, the
 * request's max_tokens, temperature and top_p when given, and the model server's address. Plus
 * our own: the key's and the instance's ids. Never a secret, never a message's content: nothing
 * of the body is read but those numbers and the model name.
 *
 * Kind CLIENT, as the conventions define an inference span: it stands for the call to the model
 * (`server.address` is the model server's), and it is the parent of the model server's own span
 * (vLLM's), to which its `traceparent` goes. A client's own span, if it sent one, is its parent.
 */
import type { Attributes, Span } from '@opentelemetry/api';
import type { FastifyRequest } from 'fastify';
import type { ObProxyError } from '../../src/errors.js';
import type { RequestOutcome } from '../../src/services/usage.js';
import type { TraceHeaders } from '../../src/upstream/upstream-client.js';
import type { AuthContext } from '../data-plane/auth-context.js';
import { StreamFacts } from './stream-facts.js';

/** What a model route's span is called by: its `gen_ai.operation.name` and `gen_ai.provider.name`. */
export interface RouteTrace {
  operation: string;
  /** The flavour of the API spoken to the model server: Anthropic's for Messages, Ollama's for its own, else OpenAI's. */
  provider: string;
}

/** The routes that call a model; any other route gets no span. */
const ROUTES: Readonly<Record<string, RouteTrace>> = {
  '/v1/chat/completions': { operation: 'chat', provider: 'openai' },
  '/v1/responses': { operation: 'chat', provider: 'openai' },
  '/v1/messages': { operation: 'chat', provider: 'anthropic' },
  '/v1/completions': { operation: 'text_completion', provider: 'openai' },
  '/api/chat': { operation: 'chat', provider: 'ollama' },
  '/api/generate': { operation: 'text_completion', provider: 'ollama' },
  '/api/embed': { operation: 'embeddings', provider: 'ollama' },
};

export function routeTraceOf(request: FastifyRequest): RouteTrace | null {
  const route = request.routeOptions.url;
  return route === undefined ? null : (ROUTES[route] ?? null);
}

/** What a span reads of a validated request: numbers and the model's name, nothing of the messages. */
export interface GenAiRequest {
  model: string;
  stream: boolean;
  /** max_tokens (or max_completion_tokens), when given. */
  completionCap: number | null;
  temperature?: number | null;
  topP?: number | null;
}

export function refusalAttributes(
  route: RouteTrace,
  err: ObProxyError,
  key: string | undefined,
  instance: string | undefined,
): Attributes {
  const a: Attributes = {
    'gen_ai.operation.name': route.operation,
    'gen_ai.provider.name': route.provider,
    'http.response.status_code': err.status,
    'error.type': err.code,
  };
  if (key !== undefined) a['ob_proxy.key.id'] = key;
  if (instance !== undefined) a['ob_proxy.instance.id'] = instance;
  return a;
}

function finishReasonsOf(body: Record<string, unknown>): string[] | null {
  const choices = body.choices;
  if (Array.isArray(choices)) {
    const reasons: string[] = [];
    for (const c of choices.slice(0, 8) as unknown[]) {
      const r = (c as { finish_reason?: unknown } | null)?.finish_reason;
      if (typeof r === 'string') reasons.push(r);
    }
    return reasons.length > 0 ? reasons : null;
  }
  if (typeof body.stop_reason === 'string') return [body.stop_reason];
  if (typeof body.done_reason === 'string') return [body.done_reason];
  const incomplete = (body.incomplete_details as { reason?: unknown } | null | undefined)?.reason;
  if (typeof incomplete === 'string') return [incomplete];
  return typeof body.status === 'string' ? [body.status] : null;
}

/** Model-server origins parsed once: the endpoint of a ready instance changes rarely. */
const servers = new Map<string, { address: string; port: number }>();

function serverOf(endpoint: string): { address: string; port: number } | null {
  let s = servers.get(endpoint);
  if (s === undefined) {
    let url: URL;
    try {
      url = new URL(endpoint);
    } catch {
      return null;
    }
    const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);
    s = { address: url.hostname.replace(/^\[|\]$/g, ''), port };
    if (servers.size >= 1_000) servers.clear();
    servers.set(endpoint, s);
  }
  return s;
}

/**
 * The span of one exchange with the model server, ended once, when the exchange is over (`end`,
 * called where its usage is counted). Its `traceparent` goes upstream (upstream-client.ts).
 */
export class ExchangeSpan implements TraceHeaders {
  readonly traceparent: string;
  readonly tracestate: string | undefined;
  private responseModel: string | null = null;
  private finishReasons: string[] | null = null;
  private errorCode: string | null = null;
  /** A stream's model and finish reason, read as its bytes pass (`read`). */
  facts: StreamFacts | null = null;

  constructor(
    private readonly span: Span,
    route: RouteTrace,
    auth: AuthContext,
    req: GenAiRequest,
  ) {
    const sc = span.spanContext();
    this.traceparent = `00-${sc.traceId}-${sc.spanId}-0${(sc.traceFlags & 1).toString(16)}`;
    const state = sc.traceState?.serialize();
    this.tracestate = state === undefined || state === '' ? undefined : state;
    const a: Attributes = {
      'gen_ai.operation.name': route.operation,
      'gen_ai.provider.name': route.provider,
      'gen_ai.request.model': req.model,
      'ob_proxy.key.id': auth.key.id,
      'ob_proxy.instance.id': auth.instance.id,
    };
    if (req.completionCap !== null) a['gen_ai.request.max_tokens'] = req.completionCap;
    if (req.temperature != null) a['gen_ai.request.temperature'] = req.temperature;
    if (req.topP != null) a['gen_ai.request.top_p'] = req.topP;
    const server = auth.instance.endpoint === null ? null : serverOf(auth.instance.endpoint);
    if (server !== null) {
      a['server.address'] = server.address;
      a['server.port'] = server.port;
    }
    span.setAttributes(a);
    if (req.stream) this.facts = new StreamFacts();
  }

  /**
   * A plain answer, parsed by the relay: its model and why it ended, in the words of the API the
   * model server spoke (a translated Responses request gets a chat answer): chat's `finish_reason`
   * per choice, Messages' `stop_reason`, a Responses answer's `incomplete_details.reason` or else
   * its `status`.
   */
  answer(body: Record<string, unknown>): void {
    if (typeof body.model === 'string') this.responseModel = body.model;
    const reasons = finishReasonsOf(body);
    if (reasons !== null) this.finishReasons = reasons;
  }

  /** A read of a streamed answer, as the model server sent it. */
  read(chunk: Buffer): void {
    this.facts?.push(chunk);
  }

  /** The exchange failed with our `code` (the first failure told is the cause). */
  error(code: string): void {
    this.errorCode ??= code;
  }

  /**
   * The exchange is over: `status` is what the client was answered (200 for a stream that then
   * failed: its error code tells), the token counts those charged to the key, `estimated` how
   * many of them were estimated because the model server did not report them.
   */
  end(status: number, input: number, output: number, estimated: number, outcome: RequestOutcome): void {
    const span = this.span;
    const facts = this.facts;
    let model = this.responseModel;
    let reasons = this.finishReasons;
    if (facts !== null) {
      model = facts.model();
      const reason = facts.finishReason();
      reasons = reason === null ? null : [reason];
    }
    const a: Attributes = {
      'http.response.status_code': status,
      'gen_ai.usage.input_tokens': input,
      'gen_ai.usage.output_tokens': output,
    };
    if (model !== null) a['gen_ai.response.model'] = model;
    if (reasons !== null) a['gen_ai.response.finish_reasons'] = reasons;
    if (estimated > 0) a['ob_proxy.usage.estimated_tokens'] = estimated;
    if (outcome === 'disconnect') a['ob_proxy.client_gone'] = true;
    if (this.errorCode !== null) {
      a['error.type'] = this.errorCode;
      span.setStatus({ code: 2 /* SpanStatusCode.ERROR */, message: this.errorCode });
    }
    span.setAttributes(a);
    // On the clock its start was read from (tracer.ts): Date.now() may step, and a span would
    // then end before it began.
    span.end(performance.now());
  }
}
