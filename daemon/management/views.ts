import type { Instance } from '../../src/domain/instance.js';
import type { KeyRecord } from '../../src/domain/key.js';
import { type InstanceView, type KeyView, instanceView, keyView } from '../../src/wire/views.js';
import type { DaemonContext } from '../context.js';

export function viewInstance(ctx: DaemonContext, i: Instance): InstanceView {
  return instanceView(i, ctx.lifecycle.registry.activeKeyCount(i.id), ctx.health.view(i));
}

export function viewKey(ctx: DaemonContext, k: KeyRecord): KeyView {
  return keyView(k, ctx.lifecycle.hasUndisplayedSecret(k.id));
}
