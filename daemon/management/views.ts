import type { Instance } from '../../src/domain/instance.js';
import type { KeyRecord } from '../../src/domain/key.js';
import { type InstanceView, type KeyView, instanceView, keyView } from '../../src/wire/views.js';
import type { KeyCheckDeps, StatusDeps } from '../context.js';

/** What an instance's view reads: its keys, and its last probe. */
export type ViewDeps = Pick<KeyCheckDeps, 'lifecycle'> & Pick<StatusDeps, 'health'>;

export function viewInstance(ctx: ViewDeps, i: Instance): InstanceView {
  return instanceView(i, ctx.lifecycle.registry.activeKeyCount(i.id), ctx.health.view(i));
}

export function viewKey(ctx: Pick<KeyCheckDeps, 'lifecycle'>, k: KeyRecord): KeyView {
  return keyView(k, ctx.lifecycle.hasUndisplayedSecret(k.id));
}
