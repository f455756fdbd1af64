/**
 * The shape of a model server's answer, without what a model chose to say: which fields, of
 * which JSON types, where; the values of the fields a client branches on (`object`, `role`,
 * `type`, `finish_reason`, `system_fingerprint`); the format of ids; and, for a stream, the
 * order of its kinds of events and which of them carry `usage`. test/conformance/
 * simulator-fidelity.test.ts holds the simulator to a real server with these.
 */

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Fields whose values are part of the shape. */
const ENUMERATED = new Set(['object', 'role', 'type', 'finish_reason', 'system_fingerprint']);

/** An id's format: its prefix up to the last `-` or `_`, then what the rest is made of and how long. */
export function idFormat(id: string): string {
  const at = Math.max(id.lastIndexOf('-'), id.lastIndexOf('_')) + 1;
  const rest = id.slice(at);
  const kind = /^\d+$/.test(rest) ? 'digits' : /^[a-z0-9]+$/.test(rest) ? 'lower-alnum' : 'alnum';
  return `${id.slice(0, at)}<${kind}${kind === 'digits' ? '' : `:${rest.length}`}>`;
}

function describe(key: string, v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'string') {
    if (ENUMERATED.has(key)) return JSON.stringify(v);
    if (key === 'id') return `id ${idFormat(v)}`;
    return 'string';
  }
  return typeof v;
}

/**
 * Every field as `path: type`, sorted; array elements share one path (`choices[]`), so two tool
 * calls have the shape of one.
 */
export function signature(value: unknown): string {
  const out = new Set<string>();
  const walk = (v: unknown, path: string, key: string): void => {
    out.add(`${path}: ${describe(key, v)}`);
    if (Array.isArray(v)) for (const e of v) walk(e, `${path}[]`, '');
    else if (isObject(v)) for (const [k, c] of Object.entries(v)) walk(c, path === '' ? k : `${path}.${k}`, k);
  };
  walk(value, '', '');
  return [...out].sort().join('\n');
}

/** What an event of a chat stream is there for. */
export type EventKind = 'first' | 'delta' | 'finish' | 'usage' | 'error' | '[DONE]' | 'other';

export function eventKind(e: unknown): EventKind {
  if (e === '[DONE]') return '[DONE]';
  if (!isObject(e)) return 'other';
  if ('error' in e) return 'error';
  const choices = e.choices;
  if (Array.isArray(choices) && choices.length === 0) return 'usage';
  const choice = Array.isArray(choices) && isObject(choices[0]) ? choices[0] : null;
  if (choice === null) return 'other';
  if (choice.finish_reason !== null && choice.finish_reason !== undefined) return 'finish';
  return isObject(choice.delta) && 'role' in choice.delta ? 'first' : 'delta';
}

export interface StreamShape {
  /** The kinds in order, runs of one kind taken once. */
  order: EventKind[];
  /** The kinds whose events carry `usage`. */
  usageOn: EventKind[];
  /** The distinct event signatures, each with its kind. */
  events: Set<string>;
}

export function streamShape(events: readonly unknown[]): StreamShape {
  const order: EventKind[] = [];
  const usageOn = new Set<EventKind>();
  const shapes = new Set<string>();
  for (const e of events) {
    const kind = eventKind(e);
    if (order.at(-1) !== kind) order.push(kind);
    if (isObject(e) && 'usage' in e) usageOn.add(kind);
    shapes.add(`${kind}\n${signature(e)}`);
  }
  return { order, usageOn: [...usageOn].sort(), events: shapes };
}
