/**
 * The probes' log: a failure is a warning each time the health changes to it, a recovery is an
 * info line naming what it was, and a first answer that is healthy is no line at all (at 100,000
 * instances a line each would follow every start).
 */
import { describe, expect, it } from 'vitest';
import { probeModelServers } from '../../daemon/model-probes.js';
import type { Instance } from '../../src/domain/instance.js';
import type { HealthView } from '../../src/services/instance-health.js';

const AT = '2026-11-01T00:00:00.000Z';
const inst: Instance = {
  id: 'gpu-1',
  deployment: 'dep-1',
  model: 'gemma4:26b',
  endpoint: 'http://127.0.0.1:9',
  state: 'ready',
  packEndsAt: null,
  upstreamTokenFile: null,
  createdAt: AT,
  updatedAt: AT,
} as Instance;

const view = (status: HealthView['status'], error: string | null = null): HealthView => ({
  status,
  checkedAt: AT,
  error,
});

describe('the probes log changes of health', () => {
  it('no line for a first healthy answer; a warning for a failure; info for the recovery', async () => {
    const lines: { level: string; fields: object; msg: string }[] = [];
    const log = {
      info: (fields: object, msg: string) => lines.push({ level: 'info', fields, msg }),
      warn: (fields: object, msg: string) => lines.push({ level: 'warn', fields, msg }),
    };
    const { health, probe } = probeModelServers({
      config: { probeTimeoutMs: 1000, probeRate: 25, probeConcurrency: 16 },
      clock: { now: () => Date.parse(AT) },
      registry: { instances: new Map([[inst.id, inst]]) },
      tokens: { get: () => undefined },
      log: log as never,
    });
    const endpoint = inst.endpoint!;
    health.record(inst, endpoint, view('reachable'));
    health.record(inst, endpoint, view('reachable'));
    expect(lines).toEqual([]);
    const error = `GET ${endpoint}/v1/models: connection refused`;
    health.record(inst, endpoint, view('unreachable', error));
    health.record(inst, endpoint, view('unreachable', error));
    health.record(inst, endpoint, view('reachable'));
    expect(lines).toEqual([
      {
        level: 'warn',
        fields: { instance: 'gpu-1', endpoint, health: 'unreachable', error },
        msg: 'model server probe failed',
      },
      {
        level: 'info',
        fields: { instance: 'gpu-1', endpoint, health: 'reachable', was: 'unreachable' },
        msg: 'model server probe',
      },
    ]);
    await probe.close();
  });
});
