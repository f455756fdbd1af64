import type { Instance } from '../../src/domain/instance.js';
import { type ObProxyError, obError } from '../../src/errors.js';

/** How long a model server's "no such route" is believed: an upgraded server is asked again after it. */
export const ROUTE_MISSING_MS = 10 * 60_000;

/**
 * Whether an error answer says the server has no such route, rather than refusing the request:
 * a 404 or 405 whose body is not an error envelope (Gin's `404 page not found` from an Ollama
 * before the route existed, FastAPI's `{"detail":"Not Found"}`), or llama.cpp's `File Not Found`.
 * An unknown model (Ollama's `{"error":{"message":"model \"x\" not found…"}}`) is not.
 */
export function saysNoRoute(status: number, body: string): boolean {
  if (status !== 404 && status !== 405) return false;
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return true;
  }
  if (typeof parsed !== 'object' || parsed === null) return true;
  const error = (parsed as { error?: unknown }).error;
  if (typeof error !== 'object' || error === null) return true;
  return (error as { message?: unknown }).message === 'File Not Found';
}

/**
 * Which model servers lack a route (`POST /v1/responses`, ...), learned from their answers: once
 * a server answers "no such route", for ROUTE_MISSING_MS its deployment's requests to the route
 * go the API's other way where it has one (the Responses API translated to chat completions,
 * that first request too), and are otherwise refused with 404 `route_not_found` without being
 * sent. Per deployment and endpoint, in memory: an instance moved to another server is asked
 * again.
 */
export class RouteSupport {
  private readonly missingUntil = new Map<string, number>();

  /** `route`: as a client names it (`POST /v1/responses`). */
  constructor(
    readonly route: string,
    private readonly clock: { now(): number },
  ) {}

  private keyOf(instance: Instance): string {
    return `${instance.deployment}\0${instance.endpoint ?? ''}`;
  }

  /** Whether the instance's model server is known to lack the route now. */
  missing(instance: Instance): boolean {
    // Every server serves the route until one is known not to: no key is made per request then.
    if (this.missingUntil.size === 0) return false;
    const until = this.missingUntil.get(this.keyOf(instance));
    if (until === undefined) return false;
    if (until > this.clock.now()) return true;
    this.missingUntil.delete(this.keyOf(instance));
    return false;
  }

  /** For the relay (RelayContext.routeMissing): an answer that says "no such route" is remembered, and answered as such. */
  learner(instance: Instance): (status: number, type: string | undefined, body: string) => ObProxyError | null {
    return (status, _type, body) => {
      if (!saysNoRoute(status, body)) return null;
      if (this.missingUntil.size > 10_000) this.missingUntil.clear();
      this.missingUntil.set(this.keyOf(instance), this.clock.now() + ROUTE_MISSING_MS);
      return this.notServed(instance);
    };
  }

  /** The answer to a request the instance's model server cannot serve, where the proxy has no other way. */
  notServed(instance: Instance): ObProxyError {
    return obError('route_not_found', {
      message: `The model server of deployment "${instance.id}" does not serve ${this.route}. For this key the proxy serves POST /v1/chat/completions, GET /v1/models and GET /v1/models/{model}; ask the operator to upgrade the model server.`,
    });
  }
}
