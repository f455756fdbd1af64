import type { FastifyInstance } from 'fastify';
import { validateTimestamp } from '../../src/domain/validate.js';
import { keyNotFound } from '../../src/services/lifecycle.js';
import { obError } from '../../src/errors.js';
import { clipped } from '../../src/printable.js';
import { type UsageReport, usageReport } from '../../src/wire/usage-report.js';
import type { DaemonBasics, ExchangeDeps, KeyCheckDeps } from '../context.js';
import { USAGE_BUCKETS_QUERY, USAGE_QUERY } from './schemas.js';
import { type BucketSize, type UsageBucket, bucketsIn, hourStart } from '../../src/domain/usage-buckets.js';
import { type UsageBucketsReport, bucketsReport } from '../../src/wire/usage-buckets-report.js';

type Query = { instance?: string; key?: string; since?: string };
type BucketsQuery = Query & { until?: string; by?: BucketSize };

/** `ob-proxy usage`: the receipt of each pack, from the counters in memory. */
export function registerUsageRoutes(
  app: FastifyInstance,
  ctx: Pick<KeyCheckDeps, 'lifecycle'> & Pick<ExchangeDeps, 'usage'> & Pick<DaemonBasics, 'clock'>,
): void {
  const registry = ctx.lifecycle.registry;
  app.get<{ Querystring: Query }>(
    '/v1/usage',
    { schema: { querystring: USAGE_QUERY } },
    async (request): Promise<UsageReport> => {
      const { instance, key } = request.query;
      const since = request.query.since === undefined ? undefined : validateTimestamp(request.query.since, 'since');
      if (key !== undefined && !registry.keys.has(key)) throw keyNotFound(key, `No key with id ${clipped(key)}.`);
      if (instance !== undefined && !registry.instances.has(instance) && !registry.keysOf(instance).length) {
        throw obError('instance_not_found', {
          message: `No instance ${clipped(instance)}, and no keys of one by that id. List instances with \`ob-proxy instances list\`.`,
        });
      }
      return usageReport(registry.instances, registry.keys.values(), { instance, key, since });
    },
  );

  // By the hour or day, from the store's buckets plus what this daemon counted and has not
  // written yet (in the hour it was counted in, or this hour).
  app.get<{ Querystring: BucketsQuery }>(
    '/v1/usage/buckets',
    { schema: { querystring: USAGE_BUCKETS_QUERY } },
    async (request): Promise<UsageBucketsReport> => {
      const { instance, key } = request.query;
      const since = request.query.since === undefined ? null : validateTimestamp(request.query.since, 'since');
      const until = request.query.until === undefined ? null : validateTimestamp(request.query.until, 'until');
      if (since !== null && until !== null && until <= since)
        throw obError('invalid_argument', {
          param: 'until',
          message: `until (${until}) must be after since (${since}).`,
        });
      if (key !== undefined && !registry.keys.has(key)) throw keyNotFound(key, `No key with id ${clipped(key)}.`);
      const keyIds =
        key !== undefined
          ? new Set([key])
          : instance === undefined
            ? null
            : new Set(registry.keysOf(instance).map((k) => k.id));
      const q = { since, until, keyIds };
      const stored = await ctx.lifecycle.usageBuckets(q);
      const now = hourStart(ctx.clock.now());
      const pending: UsageBucket[] = ctx.usage.peek().map((d) => ({
        keyId: d.keyId,
        size: 'hour',
        start: d.hour ?? now,
        requests: d.requests,
        promptTokens: d.promptTokens,
        completionTokens: d.completionTokens,
        errors: d.errors,
      }));
      const by = request.query.by ?? 'hour';
      return bucketsReport([...stored, ...bucketsIn(pending, q)], registry.keys, { by, since, until });
    },
  );
}
