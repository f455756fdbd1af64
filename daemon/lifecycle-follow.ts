import type { FastifyBaseLogger } from 'fastify';
import type { LifecycleService } from '../src/services/lifecycle.js';
import type { UpstreamTokens } from './upstream-tokens.js';

export interface FollowDeps {
  lifecycle: LifecycleService;
  tokens: UpstreamTokens;
  /** Re-arms the pack-end timer from the lifecycle's next pack end. */
  packTimerChanged(): void;
  log: FastifyBaseLogger;
}

/**
 * The daemon's bookkeeping of instance changes, made here once for every change, whether made
 * through this daemon's management routes or heard from another daemon of a shared store: the
 * pack timer is re-armed, and an instance's model-server token is read when it is added or made
 * ready, and forgotten when it is removed. Listeners run in the turn the registry changes, so a
 * token a route read just before its change (UpstreamTokens.prepare) is in place before any
 * request can see the instance ready. Returns the unsubscribe.
 */
export function followLifecycle(deps: FollowDeps): () => void {
  const { lifecycle, tokens, log } = deps;
  return lifecycle.onChange((e, origin) => {
    // A rotation's grace ends on the pack timer too.
    if (e.type === 'key.rotated') deps.packTimerChanged();
    if (!e.type.startsWith('instance.')) return;
    deps.packTimerChanged();
    const inst = lifecycle.registry.instances.get(e.instance);
    if (inst === undefined) {
      tokens.forget(e.instance);
      return;
    }
    if (e.type === 'instance.added' || (e.type === 'instance.state' && e.state === 'ready')) {
      tokens
        .follow(inst, origin)
        ?.catch((err: unknown) =>
          log.error({ instance: inst.id, err: (err as Error).message }, 'upstream token not loaded'),
        );
    }
  });
}
