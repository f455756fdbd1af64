import { Command } from 'commander';
import type { ModelsView } from '../../src/wire/views.js';
import { type CliDeps, type CommonOptions, example, withClient, withCommon } from '../common.js';
import { colours, printJson, shown, table } from '../output.js';

/** The instances of a model for a table: the first three, then how many more; `-` when none. */
function instancesText(ids: readonly string[]): string {
  if (ids.length === 0) return '-';
  return ids.length > 3 ? `${ids.slice(0, 3).join(', ')} (+${ids.length - 3})` : ids.join(', ');
}

const SOURCE: Record<ModelsView['source'], string> = {
  store:
    'The list is in the store: every daemon of the store allows these. Change it with `ob-proxy models allow` or `disallow`.\n',
  start:
    "This daemon's list from its start (OB_PROXY_MODELS, or the default ids): the first `ob-proxy models allow` or `disallow` writes it to the store, for every daemon of it.\n",
};

function listText(deps: CliDeps, view: ModelsView): string {
  const c = colours(deps.io);
  return (
    table([
      ['MODEL', 'INSTANCES'].map((h) => c.bold(h)),
      ...view.models.map((m) => [m.id, instancesText(m.instances)]),
    ]) + SOURCE[view.source]
  );
}

function changedLine(view: ModelsView): string {
  return `Allowed models: ${view.models.map((m) => m.id).join(', ')}.\n`;
}

/**
 * `models list|allow|disallow`: the model ids `instances add` takes, changed at run time on
 * every daemon of the store. Requests must still name the instance's own model (or an alias).
 */
export function makeModelsCommand(deps: CliDeps): Command {
  const cmd = new Command('models').description('list, allow and disallow the model ids instances may run');

  example(
    withCommon(cmd.command('list'))
      .description('the allowed model ids, and the instances (not terminated) running each')
      .action(async (o: CommonOptions) => {
        const view = await withClient(o, deps, (cl) => cl.models());
        if (o.json === true) return printJson(deps.io, view);
        deps.io.out(listText(deps, shown(view)));
      }),
    'ob-proxy models list',
  );

  example(
    withCommon(cmd.command('allow <model...>'))
      .description('allow these model ids, at once on every daemon of the store')
      .action(async (models: string[], o: CommonOptions) => {
        const view = await withClient(o, deps, (cl) => cl.changeModels({ allow: models }));
        if (o.json === true) return printJson(deps.io, view);
        deps.io.out(changedLine(shown(view)));
      }),
    'ob-proxy models allow llama3.1:8b',
    'ob-proxy models allow Qwen/Qwen2.5-7B-Instruct hf.co/user/repo:Q4_K_M',
  );

  example(
    withCommon(cmd.command('disallow <model...>'))
      .description('disallow these model ids (refused while an instance that is not terminated runs one)')
      .action(async (models: string[], o: CommonOptions) => {
        const view = await withClient(o, deps, (cl) => cl.changeModels({ disallow: models }));
        if (o.json === true) return printJson(deps.io, view);
        deps.io.out(changedLine(shown(view)));
      }),
    'ob-proxy models disallow qwen3.6:27b',
  );

  return cmd;
}
