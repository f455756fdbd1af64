import type { FastifyInstance, FastifyReply } from 'fastify';
import type { KeyRecord } from '../../src/domain/key.js';
import type { KeyPage } from '../../src/services/registry.js';
import { validateTimestamp } from '../../src/domain/validate.js';
import { keyNotFound } from '../../src/services/lifecycle.js';
import { obError } from '../../src/errors.js';
import { clipped } from '../../src/printable.js';
import {
  type UsageReport,
  type UsageReportPage,
  usageLine,
  usageReport,
  usedSince,
} from '../../src/wire/usage-report.js';
import { STREAM_PAGE, pageAfter, pageLimit, sendWholeList } from './list-pages.js';
import { sendWholeUsage } from './usage-whole.js';
import type { DaemonBasics, ExchangeDeps, KeyCheckDeps } from '../context.js';
import { USAGE_BUCKETS_QUERY, USAGE_QUERY } from './schemas.js';
import { type BucketSize, type UsageBucket, bucketsIn, hourStart } from '../../src/domain/usage-buckets.js';
import { type UsageBucketsReport, bucketsReport } from '../../src/wire/usage-buckets-report.js';

type Query = { instance?: string; key?: string; since?: string };
type ReportQuery = Query & { limit?: string; after?: string; format?: 'json' | 'lines' };
type BucketsQuery = Query & { until?: string; by?: BucketSize };

/** `ob-proxy usage`: the receipt of each pack, from the counters in memory. */
export function registerUsageRoutes(
  app: FastifyInstance,
  ctx: Pick<KeyCheckDeps, 'lifecycle'> & Pick<ExchangeDeps, 'usage'> & Pick<DaemonBasics, 'clock'>,
): void {
  const registry = ctx.lifecycle.registry;
  // A page (`limit`, `after`) or every key as JSON lines (`format=lines`) walks the keys in the
  // order of `GET /v1/keys`, so a report of a million keys is never built in one turn; without
  // either, the whole report, made and sent in pieces (sendWholeUsage) all the same.
  app.get<{ Querystring: ReportQuery }>(
    '/v1/usage',
    { schema: { querystring: USAGE_QUERY } },
    async (request, reply): Promise<UsageReport | UsageReportPage | FastifyReply> => {
      const { instance, key } = request.query;
      const since = request.query.since === undefined ? undefined : validateTimestamp(request.query.since, 'since');
      const limit = pageLimit(request.query.limit);
      const after = pageAfter(registry, request.query.after);
      if (key !== undefined && !registry.keys.has(key)) throw keyNotFound(key, `No key with id ${clipped(key)}.`);
      if (instance !== undefined && !registry.instances.has(instance) && !registry.keysOf(instance).length) {
        throw obError('instance_not_found', {
          message: `No instance ${clipped(instance)}, and no keys of one by that id. List instances with \`ob-proxy instances list\`.`,
        });
      }
      const filter = { instance, key, since };
      const page = (a: KeyRecord | null, n: number): KeyPage =>
        registry.keyPage({
          instance,
          after: a,
          limit: n,
          keep: (k) => (key === undefined || k.id === key) && usedSince(k, since),
        });
      if (limit === undefined && request.query.format === 'lines')
        return sendWholeList(
          reply,
          true,
          page,
          (k) => usageLine(registry.instances, k),
          (id) => registry.keys.get(id),
        );
      if (limit === undefined && after === null)
        return key === undefined
          ? sendWholeUsage(reply, registry, filter)
          : usageReport(registry.instances, [registry.keys.get(key)!], filter);
      const { records, next } = page(after, limit ?? STREAM_PAGE);
      return { ...usageReport(registry.instances, records, filter), next };
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
