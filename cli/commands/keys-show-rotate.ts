import type { Command } from 'commander';
import type { KeyView } from '../../src/wire/views.js';
import { type CliDeps, type CommonOptions, example, withClient, withCommon } from '../common.js';
import { confirmed } from '../confirm.js';
import { rotateQuestion } from '../questions.js';
import { formatLimits } from '../limit-options.js';
import { keyCardRows, parseGrace } from '../key-card.js';
import { colours, printJson, secretBlock, shown, table } from '../output.js';

function showText(deps: CliDeps, k: KeyView): string {
  const c = colours(deps.io);
  const paint = k.status === 'active' ? c.green : c.red;
  return table(keyCardRows(k).map(([label, value]) => [label, label === 'state' ? paint(value) : value]));
}

/** `keys show <key-id>` and `keys rotate <key-id> [--grace D]`. */
export function addShowAndRotate(cmd: Command, deps: CliDeps): void {
  example(
    withCommon(cmd.command('show <key-id>'))
      .description('one key: name, instance, state, limits, created, last used, usage (never its secret)')
      .action(async (id: string, o: CommonOptions) => {
        const key = await withClient(o, deps, (cl) => cl.getKey(id));
        if (o.json === true) return printJson(deps.io, key);
        deps.io.out(showText(deps, shown(key)));
      }),
    'ob-proxy keys show 3fA9kQ2mXz1B',
  );

  example(
    withCommon(cmd.command('rotate <key-id>'))
      .description(
        'a new key with the same name and limits (secret shown once); the old one revoked at once, or after --grace',
      )
      .option('--grace <duration>', 'the old key still serves this long (30m, 1h, 1d; at most 30d), then is revoked')
      .option('-q, --quiet', 'print only the new secret, for OB_KEY=$(ob-proxy keys rotate … -q)')
      .option('-y, --yes', 'do not ask for confirmation')
      .action(async (id: string, o: CommonOptions & { grace?: string; quiet?: boolean; yes?: boolean }) => {
        const grace = o.grace === undefined ? undefined : parseGrace(o.grace);
        const [answer, status] = await withClient(o, deps, async (cl) => {
          await confirmed(deps, o.yes, async () => {
            const key = await cl.findKey(id);
            if (key === undefined || key.status !== 'active') return null;
            return rotateQuestion(shown(key), grace === undefined || grace === 0 ? undefined : o.grace!.trim());
          });
          return [await cl.rotateKey(id, grace), await cl.status()] as const;
        });
        if (o.json === true) return printJson(deps.io, answer);
        if (o.quiet === true) return deps.io.out(`${shown(answer.secret)}\n`);
        const key = shown(answer);
        const old = key.replaces;
        deps.io.out(
          secretBlock(
            colours(deps.io),
            `Key "${key.name}" (id ${key.id}) for instance ${key.instance}:`,
            key.secret,
            shown(status.baseUrl),
          ),
        );
        if (formatLimits(key.limits) !== '-') deps.io.out(`Limits: ${formatLimits(key.limits)}.\n`);
        deps.io.out(
          old.status === 'revoked'
            ? `It replaces key ${old.id}, revoked now (reason rotated): it answers 401 from now on.\n`
            : `It replaces key ${old.id}, which still serves until ${old.revokeAt ?? '?'} and is then revoked (reason rotated).\n`,
        );
      }),
    'ob-proxy keys rotate 3fA9kQ2mXz1B',
    'ob-proxy keys rotate 3fA9kQ2mXz1B --grace 1h',
    'OB_KEY=$(ob-proxy keys rotate 3fA9kQ2mXz1B --grace 30m -q --yes)',
  );
}
