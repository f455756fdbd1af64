import type { FastifyInstance } from 'fastify';

const ALLOW_METHODS = 'GET, POST, OPTIONS';
// What OpenAI SDKs send from a browser: the key, JSON, and their x-stainless-* telemetry.
const DEFAULT_ALLOW_HEADERS =
  'authorization, content-type, openai-organization, openai-project, x-stainless-arch, x-stainless-lang, x-stainless-os, x-stainless-package-version, x-stainless-retry-count, x-stainless-runtime, x-stainless-runtime-version, x-stainless-timeout';

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
    reply.raw.setHeader('access-control-expose-headers', 'x-request-id');
    if (!any) reply.raw.setHeader('vary', 'Origin');
  });

  for (const path of ['/v1/chat/completions', '/v1/models']) {
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
