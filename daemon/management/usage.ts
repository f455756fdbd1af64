import type { FastifyInstance } from 'fastify';
import { validateTimestamp } from '../../src/domain/validate.js';
import { keyNotFound } from '../../src/services/lifecycle.js';
import { obError } from '../../src/errors.js';
import { clipped } from '../../src/printable.js';
import { type UsageReport, usageReport } from '../../src/wire/usage-report.js';
import type { DaemonContext } from '../context.js';
import { USAGE_QUERY } from './schemas.js';

type Query = { instance?: string; key?: string; since?: string };

/** `ob-proxy usage`: the receipt of each pack, from the counters in memory. */
export function registerUsageRoutes(app: FastifyInstance, ctx: DaemonContext): void {
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
}
