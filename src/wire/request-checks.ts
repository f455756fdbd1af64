import { obError } from '../errors.js';

/** Small typed checks shared by the request validators; each refusal names its field path. */

export type Json = Record<string, unknown>;

export function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function invalid(param: string, message: string): never {
  throw obError('invalid_request', { param, message });
}

/** Absent and null mean "not given" for every optional field, as in OpenAI's API. */
export function given(v: unknown): boolean {
  return v !== undefined && v !== null;
}

export function optionalString(v: unknown, path: string): void {
  if (given(v) && typeof v !== 'string') invalid(path, `${path} must be a string.`);
}

export function optionalBoolean(v: unknown, path: string): void {
  if (given(v) && typeof v !== 'boolean') invalid(path, `${path} must be true or false.`);
}

export function optionalNumber(v: unknown, path: string, min: number, max: number): void {
  if (!given(v)) return;
  if (typeof v !== 'number' || !Number.isFinite(v)) invalid(path, `${path} must be a number from ${min} to ${max}.`);
  if (v < min || v > max) invalid(path, `${path} must be from ${min} to ${max}; got ${v}.`);
}

export function optionalInteger(v: unknown, path: string, min: number, max: number): void {
  if (!given(v)) return;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
    invalid(path, `${path} must be an integer from ${min} to ${max}.`);
  }
}

export function requiredString(v: unknown, path: string, what: string): string {
  if (!given(v)) invalid(path, `${path} is required: ${what}.`);
  if (typeof v !== 'string') invalid(path, `${path} must be a string.`);
  return v;
}

export function oneOf(v: unknown, path: string, allowed: readonly string[]): void {
  if (typeof v !== 'string' || !allowed.includes(v)) invalid(path, `${path} must be one of ${allowed.join(', ')}.`);
}
