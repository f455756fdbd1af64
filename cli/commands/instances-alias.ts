import type { Command } from 'commander';
import type { InstanceView } from '../../src/wire/views.js';
import { type CliDeps, type CommonOptions, example, withClient, withCommon } from '../common.js';
import { printJson, shown } from '../output.js';
import { UsageError } from '../usage-error.js';

/**
 * An instance's aliases for a table: `-` when none. `most`: how many a cell shows before it says
 * how many more there are (`instances list` keeps its rows short; `show` gives them all).
 */
export function aliasesText(i: InstanceView, most = Infinity): string {
  const aliases = i.aliases ?? [];
  if (aliases.length === 0) return '-';
  const more = aliases.length - most;
  return more > 0 ? `${aliases.slice(0, most).join(', ')} (+${more})` : aliases.join(', ');
}

function aliasesLine(i: InstanceView): string {
  const aliases = i.aliases ?? [];
  if (aliases.length === 0) return `Instance ${i.id} has no aliases: its keys send ${i.model} as model.\n`;
  return `Keys of ${i.id} may send as model ${i.model} or its aliases: ${aliases.join(', ')}.\n`;
}

type AliasOptions = CommonOptions & { remove?: string[]; clear?: boolean };

/**
 * `instances alias <id> [alias...]`: the aliases given are added, `--remove` takes some away,
 * `--clear` takes every one away first (so `--clear a b` leaves exactly a and b). With none of
 * them it only shows the aliases. Either way it prints the aliases after; --json the instance.
 */
export function addAliasCommand(cmd: Command, deps: CliDeps): void {
  example(
    withCommon(cmd.command('alias <id> [aliases...]'))
      .description(
        "name other model ids its keys may send as model (an agent's own); the model server gets the instance's model",
      )
      .option('--remove <alias...>', 'take these aliases away')
      .option('--clear', 'take every alias away first; aliases given are then the only ones')
      .action(async (id: string, aliases: string[], o: AliasOptions) => {
        const remove = o.remove ?? [];
        const clear = o.clear === true;
        if (clear && remove.length > 0)
          throw new UsageError('Give either --clear or --remove, not both: --clear takes every alias away.');
        const change = aliases.length > 0 || remove.length > 0 || clear;
        const inst = await withClient(o, deps, (cl) =>
          change
            ? cl.alias(id, {
                ...(aliases.length > 0 ? { add: aliases } : {}),
                ...(remove.length > 0 ? { remove } : {}),
                ...(clear ? { clear } : {}),
              })
            : cl.getInstance(id),
        );
        if (o.json === true) return printJson(deps.io, inst);
        deps.io.out(aliasesLine(shown(inst)));
      }),
    'ob-proxy instances alias gpu-1 claude-sonnet-4-5 claude-haiku-4-5',
    'ob-proxy instances alias gpu-1 --remove claude-haiku-4-5',
    'ob-proxy instances alias gpu-1 --clear',
    'ob-proxy instances alias gpu-1',
  );
}
