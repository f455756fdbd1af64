import type { FastifyInstance } from 'fastify';
import { obError } from '../../src/errors.js';
import {
  type ConfirmationView,
  type DaemonsView,
  confirmationView,
  daemonsView,
} from '../../src/services/revocation-confirmation.js';
import type { KeyCheckDeps, StatusDeps } from '../context.js';
import { CONFIRMATIONS_QUERY } from './schemas.js';

/** More keys than any one command revokes is a mistake, not a question. */
const MAX_KEYS = 10_000;

/** The store's daemons as `status` shows them; a store that cannot be read says why. */
export async function daemonsOf(ctx: Pick<StatusDeps, 'daemonReports'>): Promise<DaemonsView & { problem?: string }> {
  if (ctx.daemonReports === null) return daemonsView(null);
  try {
    return daemonsView(await ctx.daemonReports([]));
  } catch (err) {
    return { shared: true, newestRevocation: null, daemons: [], problem: (err as Error).message };
  }
}

/**
 * `--wait` asks here, again and again, until every live daemon has applied the revocations or
 * its bound passes (the CLI keeps the clock): one read of the daemons' rows per question.
 */
export function registerDaemonRoutes(
  app: FastifyInstance,
  ctx: Pick<StatusDeps, 'daemonReports' | 'storeLocation'> & Pick<KeyCheckDeps, 'lifecycle'>,
): void {
  app.get('/v1/daemons', () => daemonsOf(ctx));

  app.get<{ Querystring: { keys?: string; instance?: string } }>(
    '/v1/confirmations',
    { schema: { querystring: CONFIRMATIONS_QUERY } },
    async (request): Promise<ConfirmationView> => {
      const { keys, instance } = request.query;
      const ids = new Set(keys === undefined || keys === '' ? [] : keys.split(','));
      if (instance !== undefined)
        for (const k of ctx.lifecycle.registry.keysOf(instance)) if (k.status === 'revoked') ids.add(k.id);
      if (ids.size > MAX_KEYS)
        throw obError('invalid_argument', { message: `Ask about at most ${MAX_KEYS} keys at once.` });
      const list = [...ids].sort();
      if (ctx.daemonReports === null) return confirmationView(list, null);
      try {
        return confirmationView(list, await ctx.daemonReports(list));
      } catch (err) {
        throw obError('store_unreachable', {
          message: `The daemons' reports could not be read from ${ctx.storeLocation} (${(err as Error).message}); the revocation holds on this daemon. Check that PostgreSQL is running, then \`ob-proxy status\`.`,
        });
      }
    },
  );
}
