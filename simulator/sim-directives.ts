/**
 * Knob validation, shared by `configure()`, `POST /_sim/config` and the per-request directive
 * `[[sim fail=drop-mid-stream failAfterChunks=3 chunks=20 …]]` in the last message's content.
 */
import { FLAVORS, type Flavor } from './sim-agent.js';
import { FAIL_MODES, type FailMode, type Knobs, type SimulatorOptions } from './sim-types.js';

type KnobKey = keyof Knobs;

const NUMERIC: Record<Exclude<KnobKey, 'fail'>, (n: number) => boolean> = {
  firstTokenDelayMs: (n) => n >= 0,
  tokensPerSecond: (n) => n >= 0,
  chunks: (n) => Number.isInteger(n) && n >= 0,
  failAfterChunks: (n) => Number.isInteger(n) && n >= 0,
  errorStatus: (n) => Number.isInteger(n) && n >= 400 && n <= 599,
  // Node sends no 1xx as a final status: 200 to 599 are what a server can answer with.
  status: (n) => Number.isInteger(n) && n >= 200 && n <= 599,
  bodyBytes: (n) => Number.isInteger(n) && n >= 0,
};

function isFailMode(v: unknown): v is FailMode {
  return typeof v === 'string' && (FAIL_MODES as readonly string[]).includes(v);
}

/** Checks one knob value; returns the value to store, or undefined when it is invalid. */
function checkKnob(key: KnobKey, value: unknown): number | FailMode | undefined {
  if (key === 'fail') return isFailMode(value) ? value : undefined;
  const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  return typeof n === 'number' && Number.isFinite(n) && NUMERIC[key](n) ? n : undefined;
}

function isKnobKey(key: string): key is KnobKey {
  return key === 'fail' || Object.hasOwn(NUMERIC, key);
}

export class SimConfigError extends Error {
  override name = 'SimConfigError';
}

/**
 * Validates a patch of SimulatorOptions (from code or from JSON). Undefined values are skipped;
 * unknown keys are ignored. Throws SimConfigError naming the first invalid field.
 */
export function normalizePatch(patch: unknown): Partial<SimulatorOptions> {
  if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) {
    throw new SimConfigError('config patch must be a JSON object');
  }
  const out: Partial<SimulatorOptions> = {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === undefined) continue;
    if (key === 'models') {
      if (!Array.isArray(value) || !value.every((m) => typeof m === 'string' && m !== '')) {
        throw new SimConfigError('models must be an array of non-empty strings');
      }
      out.models = [...(value as string[])];
    } else if (key === 'recordLimit') {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
        throw new SimConfigError('recordLimit must be an integer >= 0');
      }
      out.recordLimit = value;
    } else if (key === 'reasoning') {
      if (typeof value !== 'boolean') throw new SimConfigError('reasoning must be true or false');
      out.reasoning = value;
    } else if (key === 'responses' || key === 'completions' || key === 'messages') {
      if (typeof value !== 'boolean') throw new SimConfigError(`${key} must be true or false`);
      out[key] = value;
    } else if (key === 'flavor') {
      if (!(FLAVORS as readonly unknown[]).includes(value))
        throw new SimConfigError(`flavor must be one of ${FLAVORS.join(', ')}`);
      out.flavor = value as Flavor;
    } else if (isKnobKey(key)) {
      const v = checkKnob(key, value);
      if (v === undefined) throw new SimConfigError(`invalid value for ${key}: ${JSON.stringify(value)}`);
      (out as Record<string, unknown>)[key] = v;
    }
  }
  return out;
}

/** Picks the knob fields out of a normalized patch. */
export function knobsOf(patch: Partial<SimulatorOptions>): Partial<Knobs> {
  const out: Partial<Knobs> = {};
  for (const key of Object.keys(patch)) {
    if (isKnobKey(key)) (out as Record<string, unknown>)[key] = patch[key];
  }
  return out;
}

const DIRECTIVE = /\[\[sim\b([^\]]*)\]\]/;

/** The text of a message's content: a string, or the concatenated `text` parts of an array. */
function contentText(message: unknown): string {
  if (typeof message !== 'object' || message === null) return '';
  const content = (message as { content?: unknown }).content;
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  let text = '';
  for (const part of content) {
    const t = (part as { text?: unknown } | null)?.text;
    if (typeof t === 'string') text += t;
  }
  return text;
}

/**
 * The knobs for one request: `base` overridden by a `[[sim …]]` directive in the last message,
 * if any. Invalid values and unknown keys in the directive are ignored. Returns `base` itself
 * when there is no directive (no allocation on the hot path).
 */
export function resolveKnobs(base: Readonly<Knobs>, messages: readonly unknown[]): Readonly<Knobs> {
  const text = contentText(messages[messages.length - 1]);
  if (!text.includes('[[sim')) return base;
  const m = DIRECTIVE.exec(text);
  if (m === null) return base;
  const knobs: Knobs = { ...base };
  for (const pair of (m[1] ?? '').trim().split(/\s+/)) {
    const eq = pair.indexOf('=');
    if (eq <= 0) continue;
    const key = pair.slice(0, eq);
    if (!isKnobKey(key)) continue;
    const v = checkKnob(key, pair.slice(eq + 1));
    if (v !== undefined) (knobs as unknown as Record<string, unknown>)[key] = v;
  }
  return knobs;
}
