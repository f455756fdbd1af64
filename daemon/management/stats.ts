import type { FastifyInstance } from 'fastify';
import type { LiveStatsView } from '../../src/services/live-stats.js';
import type { DaemonBasics, ExchangeDeps } from '../context.js';

/** The console's live view polls this once a second: the last minute of samples per instance. */
export function registerStatsRoutes(
  app: FastifyInstance,
  ctx: Pick<ExchangeDeps, 'live'> & Pick<DaemonBasics, 'clock'>,
): void {
  app.get('/v1/stats', async (): Promise<LiveStatsView> => ctx.live.view(ctx.clock.now()));
}
