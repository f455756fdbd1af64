/**
 * Answers compared whole as `{ status, json }`: a management call's, and a refusal in our error
 * envelope (docs/contract.md), the shape both planes refuse in.
 */
import type { Inproc } from './inproc.js';

/** The status and parsed body of a management call. */
export async function manageStatusJson(
  d: Inproc,
  method: 'GET' | 'POST' | 'DELETE',
  url: string,
  body?: unknown,
): Promise<{ status: number; json: unknown }> {
  const r = await d.manage(method, url, body);
  return { status: r.status, json: r.json };
}

/** A refusal: its status and `{ error: { message, type, code, param } }`. */
export const refusal = (
  status: number,
  type: string,
  code: string,
  message: string,
  param: string | null = null,
): { status: number; json: unknown } => ({ status, json: { error: { message, type, code, param } } });
