/**
 * POST /v1/responses on a daemon built in process (test/helpers/inproc.ts): the request through
 * the data plane's `inject()`, the instance it reaches made ready without a probe, and the bodies
 * a simulator received on that route.
 */
import { expect } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Answer, type Inproc, MODEL } from './inproc.js';

/** `body` (a string is sent as it is) with `key` as the bearer token, or none when null. */
export async function postResponses(
  d: Inproc,
  key: string | null,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<Answer> {
  const res = await d.daemon.dataPlane.inject({
    method: 'POST',
    url: '/v1/responses',
    headers: {
      'content-type': 'application/json',
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
      ...headers,
    },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
  let json: unknown;
  try {
    json = JSON.parse(res.body);
  } catch {
    json = null;
  }
  return { status: res.statusCode, headers: res.headers, json, text: res.body };
}

/** The bodies `s` received on /v1/responses, in order. */
export const responsesSent = (s: Simulator): unknown[] =>
  s.requests.filter((r) => r.path === '/v1/responses').map((r) => r.body);

/** Instance `id` added and made ready (no probe); its default key's secret. */
export async function readyInstance(d: Inproc, id: string, endpoint: string, model = MODEL): Promise<string> {
  expect((await d.manage('POST', '/v1/instances', { id, model, endpoint })).status).toBe(201);
  const ready = await d.manage('POST', `/v1/instances/${id}/ready`, { probe: false });
  return (ready.json as { defaultKey: { secret: string } }).defaultKey.secret;
}
