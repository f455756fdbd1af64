/**
 * A daemon built in process that exports its spans to a test collector on 127.0.0.1:0
 * (test/helpers/otlp-receiver.ts), as service gw-test, in front of a simulator: instances live,
 * pending (made ready, then back to pending) and revoked (made ready, then stopped), each with
 * its default key, and a key `limited` to one request a minute on live. `newSpans` gives what
 * was exported since its last call; the spans of the set-up are already taken.
 */
import { expect } from 'vitest';
import type { Simulator } from '../../simulator/simulator.js';
import { type Inproc, MODEL, buildInproc, startSim } from './inproc.js';
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from './otlp-receiver.js';

/** OTLP's SPAN_KIND_CLIENT. */
export const CLIENT = 3;
/** OTLP's STATUS_CODE_ERROR. */
export const ERROR = 2;

/** A chat request saying "Hello there", with `extra` fields. */
export const hello = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  model: MODEL,
  messages: [{ role: 'user', content: 'Hello there' }],
  ...extra,
});

export interface TracedDaemon {
  d: Inproc;
  sim: Simulator;
  simUrl: string;
  collector: OtlpReceiver;
  /** Each key's secret and id, by instance id (and `limited`). */
  secrets: Record<string, string>;
  keyIds: Record<string, string>;
  /** The spans sent since the last call, once the daemon has flushed them. */
  newSpans(): Promise<ReceivedSpan[]>;
  /** The simulator's port, as the spans' server.port. */
  simPort(): number;
  close(): Promise<void>;
}

export async function startTracedDaemon(): Promise<TracedDaemon> {
  const collector = await startOtlpReceiver();
  const { sim, url: simUrl } = await startSim();
  const d = await buildInproc({ otlp: { url: `${collector.url}/v1/traces`, serviceName: 'gw-test' } });
  const secrets: Record<string, string> = {};
  const keyIds: Record<string, string> = {};
  const readyInstance = async (id: string): Promise<void> => {
    expect((await d.manage('POST', '/v1/instances', { id, model: MODEL, endpoint: simUrl })).status).toBe(201);
    const ready = await d.manage('POST', `/v1/instances/${id}/ready`, {});
    const key = (ready.json as { defaultKey: { id: string; secret: string } }).defaultKey;
    secrets[id] = key.secret;
    keyIds[id] = key.id;
  };
  let seen = 0;
  const newSpans = async (): Promise<ReceivedSpan[]> => {
    await d.daemon.ctx.tracing!.flush();
    const out = collector.spans.slice(seen);
    seen = collector.spans.length;
    return out;
  };
  await readyInstance('live');
  await readyInstance('pending');
  await d.manage('POST', '/v1/instances/pending/pending', {});
  await readyInstance('revoked');
  await d.manage('POST', '/v1/instances/revoked/stop', {});
  const limited = await d.manage('POST', '/v1/keys', { instance: 'live', name: 'one-a-minute', limits: { rpm: 1 } });
  secrets.limited = (limited.json as { secret: string }).secret;
  keyIds.limited = (limited.json as { id: string }).id;
  await newSpans();
  return {
    d,
    sim,
    simUrl,
    collector,
    secrets,
    keyIds,
    newSpans,
    simPort: () => Number(new URL(simUrl).port),
    close: async () => {
      await d.close();
      await sim.close();
      await collector.close();
    },
  };
}
