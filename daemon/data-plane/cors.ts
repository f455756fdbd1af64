import type { FastifyInstance } from 'fastify';

const ALLOW_METHODS = 'GET, POST, OPTIONS';
// What the OpenAI and Anthropic SDKs send from a browser: the key (Bearer or x-api-key), JSON,
// Anthropic's version headers, and their x-stainless-* telemetry.
const DEFAULT_ALLOW_HEADERS =
  'authorization, content-type, openai-organization, openai-project, x-api-key, anthropic-version, anthropic-beta, anthropic-dangerous-direct-browser-access, x-stainless-arch, x-stainless-lang, x-stainless-os, x-stainless-package-version, x-stainless-retry-count, x-stainless-runtime, x-stainless-runtime-version, x-stainless-timeout';
// What a browser client may read of an answer: its id, its limits and when to retry, the pack's end.
const EXPOSE_HEADERS =
  'x-request-id, x-ratelimit-limit-requests, x-ratelimit-remaining-requests, x-ratelimit-reset-requests, x-ratelimit-limit-tokens, x-ratelimit-remaining-tokens, x-ratelimit-reset-tokens, retry-after, retry-after-ms, x-ob-pack-ends-at, x-ob-pack-ends-soon';
/** Every route of the data plane a browser may call: each answers its preflight. */
const ROUTES = [
  '/v1/chat/completions',
  '/v1/responses',
  '/v1/completions',
  '/v1/messages',
  '/v1/models',
  '/v1/models/:model',
];

/**
 * Opt-in CORS for browser clients (OB_PROXY_CORS_ORIGINS). Preflights are answered without a
 * key (browsers never send one on OPTIONS); every real request still needs its key. Headers are
 * set on the raw response so they also reach hijacked (proxied) responses.
 */
export function registerCors(app: FastifyInstance, origins: readonly string[]): void {
  if (origins.length === 0) return;
  const any = origins.includes('*');
  const allowed = new Set(origins);
  const allow = (origin: string | undefined): string | null => {
    if (origin === undefined) return null;
    if (any) return '*';
    return allowed.has(origin) ? origin : null;
  };

  app.addHook('onRequest', async (request, reply) => {
    const origin = allow(request.headers.origin);
    if (origin === null) return;
    reply.raw.setHeader('access-control-allow-origin', origin);
    reply.raw.setHeader('access-control-expose-headers', EXPOSE_HEADERS);
    if (!any) reply.raw.setHeader('vary', 'Origin');
  });

  for (const path of ROUTES) {
    app.options(path, async (request, reply) => {
      if (allow(request.headers.origin) === null) return reply.code(204).send();
      const asked = request.headers['access-control-request-headers'];
      return reply
        .code(204)
        .headers({
          'access-control-allow-methods': ALLOW_METHODS,
          'access-control-allow-headers': typeof asked === 'string' && asked !== '' ? asked : DEFAULT_ALLOW_HEADERS,
          'access-control-max-age': '600',
        })
        .send();
    });
  }
}
