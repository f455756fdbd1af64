import { describe, expect, it } from 'vitest';
import {
  INSTANCE_STATES,
  type Instance,
  type InstanceAction,
  type InstanceState,
  assertTransition,
  normalizeEndpoint,
} from '../../src/domain/instance.js';
import { ObProxyError } from '../../src/errors.js';

function instance(state: InstanceState): Instance {
  return {
    id: 'gpu-1',
    deployment: 'd1',
    model: 'gemma4:26b',
    endpoint: null,
    state,
    packEndsAt: null,
    aliases: [],
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
  };
}

// The whole table, written out: a change to what may follow what must be made here on purpose.
// Terminated is final; stopped and failed may be made ready again; pending only from ready.
const EXPECTED: Record<InstanceAction, Partial<Record<InstanceState, InstanceState>>> = {
  ready: { pending: 'ready', stopped: 'ready', failed: 'ready' },
  pending: { ready: 'pending' },
  stop: { pending: 'stopped', ready: 'stopped' },
  fail: { pending: 'failed', ready: 'failed', stopped: 'failed' },
  terminate: { pending: 'terminated', ready: 'terminated', stopped: 'terminated', failed: 'terminated' },
};

describe('instance transitions', () => {
  for (const [action, allowed] of Object.entries(EXPECTED) as [
    InstanceAction,
    Partial<Record<InstanceState, InstanceState>>,
  ][]) {
    for (const from of INSTANCE_STATES) {
      const to = allowed[from];
      if (to !== undefined) {
        it(`${action} from ${from} → ${to}`, () => {
          expect(assertTransition(instance(from), action)).toBe(to);
        });
      } else {
        it(`${action} from ${from} is refused, naming the states it works from`, () => {
          let err: unknown;
          try {
            assertTransition(instance(from), action);
          } catch (e) {
            err = e;
          }
          expect(err).toBeInstanceOf(ObProxyError);
          const e = err as ObProxyError;
          expect([e.code, e.status]).toEqual(['invalid_transition', 409]);
          expect(e.message).toBe(
            `Instance gpu-1 is ${from}; "${action}" works only from ${Object.keys(allowed).join(', ')}.`,
          );
        });
      }
    }
  }

  it('nothing leaves terminated', () => {
    for (const action of Object.keys(EXPECTED) as InstanceAction[]) {
      expect(() => assertTransition(instance('terminated'), action)).toThrow(ObProxyError);
    }
  });
});

describe('normalizeEndpoint', () => {
  it.each([
    ['http://10.0.0.5:11434', 'http://10.0.0.5:11434'],
    ['http://10.0.0.5:11434/', 'http://10.0.0.5:11434'],
    ['http://10.0.0.5:11434/v1', 'http://10.0.0.5:11434'],
    ['http://10.0.0.5:11434/v1/', 'http://10.0.0.5:11434'],
    ['https://gpu.example/ollama/v1', 'https://gpu.example/ollama'],
    ['HTTP://GPU.EXAMPLE:80/', 'http://gpu.example'],
  ])('%s → %s', (raw, want) => {
    expect(normalizeEndpoint(raw)).toBe(want);
  });

  it.each([
    ['not a url', 'is not a URL'],
    ['ftp://gpu.example', 'must be http:// or https://'],
    ['http://user:pw@gpu.example', 'without credentials'],
    ['http://gpu.example/?x=1', 'without credentials, query or fragment'],
    ['http://gpu.example/#f', 'without credentials, query or fragment'],
  ])('refuses %s with param "endpoint"', (raw, says) => {
    let err: unknown;
    try {
      normalizeEndpoint(raw);
    } catch (e) {
      err = e;
    }
    expect(err).toMatchObject({ code: 'invalid_argument', param: 'endpoint' });
    expect((err as Error).message).toContain(says);
  });
});
