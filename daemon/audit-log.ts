import type { Logger } from 'pino';
import type { LifecycleService } from '../src/services/lifecycle.js';
import type { KeyLimiter } from '../src/services/key-limiter.js';
import type { Metrics } from './metrics/metrics.js';
import type { UsageLog } from './usage-log.js';

/**
 * The audit trail in the log too, event by event: key creations and revocations (by hand, by a
 * stop, by a pack end with no command), instance changes. Never a secret: events hold none.
 * Changes heard from other daemons of a shared store are logged as such, and counted by the
 * daemon that made them only, so a cluster's sum of revocations is not multiplied by its size.
 * A revoked key's limit windows, and its parts kept by the usage log, are dropped with it.
 * Returns the unsubscribe.
 */
export function logAudit(deps: {
  lifecycle: Pick<LifecycleService, 'onChange'>;
  keyLimits: Pick<KeyLimiter, 'forget'>;
  metrics: Pick<Metrics, 'revoked'> | null;
  usageLog?: Pick<UsageLog, 'forget'> | null;
  log: Pick<Logger, 'info'>;
}): () => void {
  const { lifecycle, keyLimits, metrics, usageLog, log } = deps;
  return lifecycle.onChange((e, origin) => {
    log.info(
      {
        audit: e.type,
        instance: e.instance,
        ...(e.keyId === undefined ? {} : { key: e.keyId, keyName: e.keyName }),
        ...(e.state === undefined ? {} : { state: e.state }),
        ...(e.reason === undefined ? {} : { reason: e.reason }),
        ...(e.limits === undefined ? {} : { limits: e.limits }),
        ...(e.aliases === undefined ? {} : { aliases: e.aliases }),
        ...(e.models === undefined ? {} : { models: e.models }),
        ...(e.newKeyId === undefined ? {} : { newKey: e.newKeyId, revokeAt: e.revokeAt }),
        seq: e.seq,
        ...(origin === 'remote' ? { origin } : {}),
      },
      'audit',
    );
    if (e.type === 'key.revoked' && e.keyId !== undefined) {
      keyLimits.forget(e.keyId);
      usageLog?.forget(e.keyId);
    }
    if (metrics !== null && e.type === 'key.revoked' && origin !== 'remote') metrics.revoked(e.reason ?? 'manual');
  });
}
