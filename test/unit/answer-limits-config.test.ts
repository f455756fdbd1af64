/** The limits on a model server's answer: defaults, flag over environment, and refused values. */
import { describe, expect, it } from 'vitest';
import { resolveConfig } from '../../src/config-resolve.js';

const limits = (c: ReturnType<typeof resolveConfig>): unknown => ({
  frame: c.maxFrameBytes,
  answer: c.maxAnswerBytes,
  error: c.maxErrorBytes,
  deadline: c.responseDeadlineMs,
});

describe('answer limits in the config', () => {
  it('defaults: 1 MiB frame, 32 MiB answer, 64 KiB error body, 30 min deadline', () => {
    expect(limits(resolveConfig({ home: '/tmp/x' }, {}, '/tmp'))).toEqual({
      frame: 1_048_576,
      answer: 33_554_432,
      error: 65_536,
      deadline: 1_800_000,
    });
  });

  it('from the environment, and a flag over it; the deadline in seconds', () => {
    const env = {
      OB_PROXY_MAX_FRAME_BYTES: '4096',
      OB_PROXY_MAX_ANSWER_BYTES: '2048',
      OB_PROXY_MAX_ERROR_BYTES: '1024',
      OB_PROXY_RESPONSE_DEADLINE: '90',
    };
    expect(limits(resolveConfig({ home: '/tmp/x' }, env, '/tmp'))).toEqual({
      frame: 4096,
      answer: 2048,
      error: 1024,
      deadline: 90_000,
    });
    expect(
      limits(resolveConfig({ home: '/tmp/x', maxFrameBytes: '8192', responseDeadline: '2.5' }, env, '/tmp')),
    ).toEqual({ frame: 8192, answer: 2048, error: 1024, deadline: 2_500 });
  });

  it('refuses values that would turn a limit off or make no sense', () => {
    for (const [name, value] of [
      ['OB_PROXY_MAX_FRAME_BYTES', '0'],
      ['OB_PROXY_MAX_ANSWER_BYTES', '1.5'],
      ['OB_PROXY_MAX_ERROR_BYTES', 'lots'],
      ['OB_PROXY_RESPONSE_DEADLINE', '0'],
    ] as const) {
      expect(() => resolveConfig({ home: '/tmp/x' }, { [name]: value }, '/tmp')).toThrow(/must be a number/);
    }
  });
});
