import type { Instance } from '../domain/instance.js';
import type { AuditEvent, KeyRecord } from '../domain/key.js';

export const STORE_VERSION = 2;

export interface StoreData {
  version: number;
  instances: Instance[];
  keys: KeyRecord[];
  events: AuditEvent[];
}

export type Mutation =
  | { op: 'putInstance'; instance: Instance }
  | { op: 'deleteInstance'; id: string }
  | { op: 'putKey'; key: KeyRecord }
  | { op: 'appendEvent'; event: AuditEvent };

/**
 * The daemon's only way to persistence. Narrow on purpose: a PostgreSQL store implements the
 * same three calls. `commit` resolves only once every mutation is durable, and persists all of
 * them or none.
 */
export interface Store {
  load(): Promise<StoreData>;
  commit(mutations: readonly Mutation[]): Promise<void>;
  close(): Promise<void>;
  /** Where the data lives, for logs and `status` (never credentials). */
  readonly location: string;
  /**
   * Whether a key's revocation is durable even though a commit carrying it failed (a store with
   * a revocation journal). Absent: only a successful commit makes it durable.
   */
  isRevocationDurable?(keyId: string): boolean;
}

export function emptyData(): StoreData {
  return { version: STORE_VERSION, instances: [], keys: [], events: [] };
}

/** In-memory tables that mutations apply to; serialised whole by file-backed stores. */
export class Tables {
  readonly instances = new Map<string, Instance>();
  readonly keys = new Map<string, KeyRecord>();
  events: AuditEvent[] = [];

  static from(data: StoreData): Tables {
    const t = new Tables();
    for (const i of data.instances) t.instances.set(i.id, i);
    for (const k of data.keys) t.keys.set(k.id, k);
    t.events = [...data.events];
    return t;
  }

  apply(m: Mutation): void {
    switch (m.op) {
      case 'putInstance': this.instances.set(m.instance.id, structuredClone(m.instance)); break;
      case 'deleteInstance': this.instances.delete(m.id); break;
      case 'putKey': this.keys.set(m.key.id, structuredClone(m.key)); break;
      case 'appendEvent': this.events.push(structuredClone(m.event)); break;
    }
  }

  toData(): StoreData {
    return { version: STORE_VERSION, instances: [...this.instances.values()], keys: [...this.keys.values()], events: this.events };
  }
}
