import type { Command } from 'commander';
import type { KeyView } from '../../src/wire/views.js';
import { clipped } from '../../src/printable.js';
import { type CliDeps, type CommonOptions, example, withClient, withCommon } from '../common.js';
import { confirmed } from '../confirm.js';
import { formatLimits } from '../limit-options.js';
import { colours, printJson, secretBlock, shown, table } from '../output.js';
import { UsageError } from '../usage-error.js';

const UNIT_S: Record<string, number> = { s: 1, m: 60, h: 3_600, d: 86_400, w: 604_800 };
const GRACE_MAX_S = 30 * 86_400;

/** `--grace`: a duration (`30m`, `1h`, `1d12h`), or 0 for none; at most 30 days. */
export function parseGrace(raw: string): number {
  const text = raw.trim();
  if (text === '0') return 0;
  const m = /^((?:\d+[smhdw])+)$/.exec(text);
  let s = 0;
  if (m !== null) for (const [, n, unit] of m[1]!.matchAll(/(\d+)([smhdw])/g)) s += Number(n) * UNIT_S[unit!]!;
  if (m === null || s > GRACE_MAX_S)
    throw new UsageError(`--grace must be a duration up to 30 days (90s, 30m, 1h, 1d12h) or 0, got "${clipped(raw)}".`);
  return s;
}

/** A key's state in words: active, active until its rotation's grace ends, or revoked and why. */
export function stateText(k: KeyView): string {
  if (k.status === 'revoked') return `revoked at ${k.revokedAt ?? '?'} (${k.revokeReason ?? '?'})`;
  return k.revokeAt === undefined ? 'active' : `active until ${k.revokeAt}, then revoked (rotated)`;
}

function showText(deps: CliDeps, k: KeyView): string {
  const c = colours(deps.io);
  const u = k.usage;
  return table([
    ['id', k.id],
    ['name', k.name],
    ['instance', k.instance],
    ['state', k.status === 'active' ? c.green(stateText(k)) : c.red(stateText(k))],
    ['hint', k.hint],
    ['default', k.isDefault ? (k.revealable ? 'yes (unrevealed)' : 'yes') : 'no'],
    ['limits', formatLimits(k.limits) === '-' ? 'none' : formatLimits(k.limits)],
    ['created', k.createdAt],
    ['first used', u.firstUsedAt ?? '-'],
    ['last used', k.lastUsedAt ?? '-'],
    ['requests', String(u.requests)],
    [
      'tokens',
      `${u.promptTokens} prompt, ${u.completionTokens} completion (${u.reasoningTokens} reasoning, ${u.estimatedTokens} estimated)`,
    ],
    ['errors', String(u.errors)],
    ['disconnects', String(u.disconnects)],
  ]);
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
            const k = shown(key);
            return `Rotate key "${k.name}" (${k.hint}) of instance ${k.instance}? Its secret stops working ${grace === undefined || grace === 0 ? 'now' : `in ${o.grace!.trim()}`}.`;
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
