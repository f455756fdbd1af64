import type { FastifyInstance } from 'fastify';
import { instancesUsing } from '../../src/domain/allowed-models.js';
import type { ModelsView } from '../../src/wire/views.js';
import type { KeyCheckDeps } from '../context.js';
import { MODELS_BODY, type ModelsBody } from './schemas.js';

function viewModels(ctx: Pick<KeyCheckDeps, 'lifecycle'>): ModelsView {
  const lc = ctx.lifecycle;
  const instances = [...lc.registry.instances.values()];
  return {
    models: lc.models.map((id) => ({ id, instances: instancesUsing(instances, id) })),
    source: lc.modelsSource,
  };
}

/**
 * The allowed models: listed, and changed in one audited commit that every daemon of a shared
 * store applies as it hears it (the same change feed as any other change).
 */
export function registerModelRoutes(app: FastifyInstance, ctx: Pick<KeyCheckDeps, 'lifecycle'>): void {
  app.get('/v1/models', async () => viewModels(ctx));

  // Body: `allow` ids to add, `disallow` ids to take away; the answer is the list after.
  app.post<{ Body: ModelsBody }>('/v1/models', { schema: { body: MODELS_BODY } }, async (request) => {
    await ctx.lifecycle.changeModels(request.body);
    return viewModels(ctx);
  });
}
