/**
 * resolveConfig for a user whose home is /home/u, and its refusals read back: each must be an
 * ObProxyError `invalid_argument`, given as the flag (or variable) it names and its message.
 * Sizes in bytes, MiB and GiB, as the settings take them.
 */
import { expect } from 'vitest';
import { type Config, type ConfigFlags, type Env } from '../../src/config.js';
import { resolveConfig } from '../../src/config-resolve.js';
import { ObProxyError } from '../../src/errors.js';

export const MiB = 1024 * 1024;
export const GiB = 1024 * MiB;

export function resolve(flags: ConfigFlags = {}, env: Env = {}): Config {
  return resolveConfig(flags, env, '/home/u');
}

export function refusal(flags: ConfigFlags, env: Env = {}): { param: string | null; message: string } {
  try {
    resolve(flags, env);
  } catch (err) {
    expect(err).toBeInstanceOf(ObProxyError);
    const e = err as ObProxyError;
    expect(e.code).toBe('invalid_argument');
    return { param: e.param, message: e.message };
  }
  throw new Error('resolveConfig accepted it');
}
