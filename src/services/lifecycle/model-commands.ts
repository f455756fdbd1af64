import { type ModelsChange, changeAllowedModels, sameModels } from '../../domain/allowed-models.js';

import { PackEnds } from './pack-ends.js';

/** The model ids instances may be added with, changed at run time on every daemon of the store. */
export class ModelCommands extends PackEnds {
  /**
   * Where the allowed list comes from: `store` once `models allow` or `disallow` wrote one (every
   * daemon of the store then allows the same), else `start` (this daemon's OB_PROXY_MODELS, or
   * the default ids).
   */
  get modelsSource(): 'store' | 'start' {
    return this.storedModels === null ? 'start' : 'store';
  }

  /**
   * Allows and disallows model ids (domain/allowed-models.ts says what is refused), in one commit
   * with a `models.changed` event, durable before it is answered. The first change writes the
   * whole list, the one this daemon allowed from its start plus the change. A change that leaves
   * the list as it is writes nothing.
   */
  changeModels(change: ModelsChange): Promise<readonly string[]> {
    return this.fresh(async () => {
      const current = this.allowedModels;
      const next = changeAllowedModels(current, change, this.reg.instances.values());
      if (sameModels(next, current)) return current;
      const prev = this.storedModels === null ? null : [...this.storedModels];
      await this.commit(
        [{ op: 'setModels', models: next, prev, disallowed: current.filter((m) => !next.includes(m)) }],
        this.event({ type: 'models.changed', instance: '', models: [...next] }),
      );
      return next;
    });
  }
}
