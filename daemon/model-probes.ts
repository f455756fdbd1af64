import type { Logger } from 'pino';
import type { Clock } from '../src/clock.js';
import type { Config } from '../src/config.js';
import { InstanceHealth } from '../src/services/instance-health.js';
import type { Registry } from '../src/services/registry.js';
import { ModelProbe } from '../src/upstream/model-probe.js';
import type { UpstreamTokens } from './upstream-tokens.js';

/** A probe's answer is read no further than this. */
const PROBE_MAX_BYTES = 1024 * 1024;

/**
 * The model servers' health: each ready instance's endpoint probed with its upstream token, and
 * each change of health logged once (a server back as info, one failing as a warning; a first
 * healthy answer is not a change).
 */
export function probeModelServers(deps: {
  config: Pick<Config, 'probeTimeoutMs' | 'probeRate' | 'probeConcurrency'>;
  clock: Clock;
  registry: Pick<Registry, 'instances'>;
  tokens: Pick<UpstreamTokens, 'get'>;
  log: Pick<Logger, 'info' | 'warn'>;
}): { probe: ModelProbe; health: InstanceHealth } {
  const { config, clock, registry, tokens, log } = deps;
  const probe = new ModelProbe({ timeoutMs: config.probeTimeoutMs, maxBytes: PROBE_MAX_BYTES });
  const health = new InstanceHealth({
    clock,
    rate: config.probeRate,
    concurrency: config.probeConcurrency,
    probe: (endpoint, model, token) => probe.probe(endpoint, model, token),
    token: (id) => tokens.get(id),
    instances: () => registry.instances.values(),
    instance: (id) => registry.instances.get(id),
    changed: (inst, now, before) => {
      // A first answer that is healthy is not news: at 100,000 instances a line for each would
      // be most of the probes' CPU after every start, and a failure or a recovery is still a line.
      if (now.status === 'reachable') {
        if (before === null) return;
        log.info(
          {
            instance: inst.id,
            endpoint: inst.endpoint,
            health: now.status,
            was: before.status,
          },
          'model server probe',
        );
      } else
        log.warn(
          { instance: inst.id, endpoint: inst.endpoint, health: now.status, error: now.error },
          'model server probe failed',
        );
    },
  });
  return { probe, health };
}
