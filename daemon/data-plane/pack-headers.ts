import type { Instance } from '../../src/domain/instance.js';
import type { HeaderList } from '../../src/services/key-limiter.js';

/** The end of the pack of the key's instance, ISO 8601 UTC, on every answer to the key (docs/contract.md §3.8). */
export const PACK_ENDS_AT = 'x-ob-pack-ends-at';
/** Present (`true`) from --pack-warning before that end. */
export const PACK_ENDS_SOON = 'x-ob-pack-ends-soon';

/** An instance's two header lists, made once per instance record (a record is replaced, never changed). */
interface PackLists {
  warningMs: number;
  soonFrom: number;
  at: string;
  normal: HeaderList;
  soon: HeaderList;
}

const lists = new WeakMap<Instance, PackLists>();

function listsOf(inst: Instance, packEndsAt: string, warningMs: number): PackLists {
  let p = lists.get(inst);
  if (p === undefined || p.warningMs !== warningMs) {
    const ms = Date.parse(packEndsAt);
    const at = new Date(ms).toISOString();
    p = {
      warningMs,
      soonFrom: ms - warningMs,
      at,
      normal: Object.freeze([PACK_ENDS_AT, at]),
      soon: Object.freeze([PACK_ENDS_AT, at, PACK_ENDS_SOON, 'true']),
    };
    lists.set(inst, p);
  }
  return p;
}

/**
 * The pack headers of an answer to a key of `inst`, or null when it has no pack end: one of the
 * instance's two lists, chosen by the clock, so a request allocates nothing for them. They name
 * only the key's own instance's end.
 */
export function packHeaders(inst: Instance, now: number, warningMs: number): HeaderList | null {
  const end = inst.packEndsAt;
  if (end === null) return null;
  const p = listsOf(inst, end, warningMs);
  return now >= p.soonFrom ? p.soon : p.normal;
}

/** For the model object of `GET /v1/models`: the end and whether it is near, or null without a pack. */
export function packState(inst: Instance, now: number, warningMs: number): { at: string; soon: boolean } | null {
  const end = inst.packEndsAt;
  if (end === null) return null;
  const p = listsOf(inst, end, warningMs);
  return { at: p.at, soon: now >= p.soonFrom };
}
