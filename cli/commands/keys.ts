import { Command } from 'commander';
import type { KeyView, RevocationView } from '../../src/wire/views.js';
import { type CliDeps, type CommonOptions, example, withClient, withCommon } from '../common.js';
import { confirmed } from '../confirm.js';
import { formatLimits, limitsFrom, withLimitOptions } from '../limit-options.js';
import { colours, printJson, secretBlock, shown, table } from '../output.js';
import { UsageError } from '../usage-error.js';
import { type PageFlags, lineOut, nextLine, pageOf, withPageOptions } from '../list-options.js';
import { addShowAndRotate } from './keys-show-rotate.js';
import {
  type WaitOptions,
  confirmationJson,
  confirmedLine,
  unconfirmedError,
  waitBound,
  waitConfirmed,
  withWaitOptions,
} from '../wait-confirmed.js';

type LimitFlags = { rpm?: string; tpm?: string; concurrency?: string };

function keyRows(deps: CliDeps, keys: KeyView[]): string {
  const c = colours(deps.io);
  return table([
    ['ID', 'NAME', 'INSTANCE', 'STATUS', 'HINT', 'DEFAULT', 'CREATED', 'LAST USED', 'REQUESTS', 'LIMITS'].map((h) =>
      c.bold(h),
    ),
    ...keys.map((k) => [
      k.id,
      k.name,
      k.instance,
      k.status === 'revoked'
        ? c.red(`revoked (${k.revokeReason})`)
        : k.revokeAt === undefined
          ? c.green('active')
          : c.yellow(`active until ${k.revokeAt}`),
      k.hint,
      k.isDefault ? (k.revealable ? 'yes (unrevealed)' : 'yes') : '',
      k.createdAt,
      k.lastUsedAt ?? '-',
      String(k.usage.requests),
      formatLimits(k.limits),
    ]),
  ]);
}

export function makeKeysCommand(deps: CliDeps): Command {
  const cmd = new Command('keys').description('create, list, show, limit, rotate, revoke and reveal API keys');

  example(
    withLimitOptions(
      withCommon(cmd.command('create'))
        .description('create a named key for a ready instance; prints the secret once')
        .requiredOption('--instance <id>', 'the ready instance the key is bound to')
        .requiredOption('--name <name>', 'a name for the key (who or what uses it)')
        .option('-q, --quiet', 'print only the secret, for OB_KEY=$(ob-proxy keys create … -q)'),
      false,
    ).action(async (o: CommonOptions & LimitFlags & { instance: string; name: string; quiet?: boolean }) => {
      const limits = limitsFrom(o);
      const [answer, status] = await withClient(
        o,
        deps,
        async (cl) =>
          [
            await cl.createKey(o.instance, o.name, Object.keys(limits).length === 0 ? undefined : limits),
            await cl.status(),
          ] as const,
      );
      if (o.json === true) return printJson(deps.io, answer);
      if (o.quiet === true) return deps.io.out(`${shown(answer.secret)}\n`);
      const key = shown(answer);
      deps.io.out(
        secretBlock(
          colours(deps.io),
          `Key "${key.name}" (id ${key.id}) for instance ${key.instance}:`,
          key.secret,
          shown(status.baseUrl),
        ),
      );
      if (formatLimits(key.limits) !== '-') deps.io.out(`Limits: ${formatLimits(key.limits)}.\n`);
    }),
    'ob-proxy keys create --instance gpu-1 --name ci-bot',
    'ob-proxy keys create --instance gpu-1 --name notebook --rpm 60 --tpm 20000 --concurrency 2',
    'OB_KEY=$(ob-proxy keys create --instance gpu-1 --name ci-bot -q)',
  );

  example(
    withPageOptions(
      withCommon(cmd.command('list'))
        .description('list key records (never secrets), oldest first')
        .option('--instance <id>', 'only keys of this instance')
        .option('--status <status>', 'only active or only revoked keys'),
      'keys',
    ).action(async (o: CommonOptions & PageFlags & { instance?: string; status?: string }) => {
      const status = statusOf(o.status);
      const page = pageOf(o);
      if (page === null) {
        if (o.all === true)
          return withClient(o, deps, (cl) => cl.keyLines({ instance: o.instance, status }, lineOut(deps.io)));
        const keys = await withClient(o, deps, (cl) => cl.listKeys(o.instance));
        return printJson(
          deps.io,
          keys.filter((k) => status === undefined || k.status === status),
        );
      }
      const answer = await withClient(o, deps, (cl) => cl.keyPage({ instance: o.instance, status, ...page }));
      if (o.json === true) return printJson(deps.io, answer);
      const keys = answer.keys;
      deps.io.out(keys.length === 0 ? 'No keys.\n' : keyRows(deps, shown(keys)));
      deps.io.out(nextLine('ob-proxy keys list', shown(answer.next), page.limit, keys.length));
    }),
    'ob-proxy keys list --instance gpu-1',
    'ob-proxy keys list --status active --limit 100 --after 3fA9kQ2mXz1B',
    'ob-proxy keys list --all > keys.jsonl',
  );

  example(
    withLimitOptions(
      withCommon(cmd.command('limit <key-id>')).description(
        "change a key's limits at once, on every daemon of the store (none removes one; others are kept)",
      ),
      true,
    ).action(async (id: string, o: CommonOptions & LimitFlags) => {
      const limits = limitsFrom(o);
      if (Object.keys(limits).length === 0)
        throw new UsageError('Give at least one of --rpm, --tpm, --concurrency (a number, or none).');
      const answer = await withClient(o, deps, (cl) => cl.setKeyLimits(id, limits));
      if (o.json === true) return printJson(deps.io, answer);
      const key = shown(answer);
      deps.io.out(
        `Limits of key ${key.id} ("${key.name}"): ${formatLimits(key.limits) === '-' ? 'none' : formatLimits(key.limits)}.\n`,
      );
    }),
    'ob-proxy keys limit 3fA9kQ2mXz1B --rpm 120 --concurrency 4',
    'ob-proxy keys limit 3fA9kQ2mXz1B --tpm none',
  );

  addShowAndRotate(cmd, deps);

  example(
    withWaitOptions(
      withCommon(cmd.command('revoke <key-id>'))
        .description('revoke one key, for ever (asks first on a terminal)')
        .option('-y, --yes', 'do not ask for confirmation'),
    ).action(async (id: string, o: CommonOptions & WaitOptions & { yes?: boolean }) => {
      const bound = waitBound(o, deps);
      const [answer, confirmation] = await withClient(o, deps, async (cl) => {
        await confirmed(deps, o.yes, async () => {
          const key = await cl.findKey(id);
          // An unknown or revoked key: nothing to ask, the daemon's refusal says why.
          if (key === undefined || key.status !== 'active') return null;
          const k = shown(key);
          return `Revoke key "${k.name}" (${k.hint}) of instance ${k.instance} for ever?`;
        });
        const key = await cl.revokeKey(id);
        return [key, bound === null ? null : await waitConfirmed(cl, { keys: [key.id] }, bound)] as const;
      });
      if (o.json === true)
        printJson(
          deps.io,
          confirmation === null ? answer : { ...answer, confirmation: confirmationJson(confirmation) },
        );
      else {
        const key = shown(answer);
        deps.io.out(`Revoked key ${key.id} ("${key.name}") of instance ${key.instance}. It answers 401 from now on.\n`);
        if (key.storePending !== undefined)
          deps.io.out(
            `Every daemon refuses it; its row and audit event are not in the store yet (${key.storePending}) and are written as soon as it takes writes.\n`,
          );
        if (confirmation?.view.confirmed === true) deps.io.out(confirmedLine(shown(confirmation)));
      }
      if (confirmation !== null && !confirmation.view.confirmed) throw unconfirmedError(shown(confirmation), bound!);
    }),
    'ob-proxy keys revoke 3fA9kQ2mXz1B',
    'ob-proxy keys revoke 3fA9kQ2mXz1B --yes --wait',
  );

  example(
    withCommon(cmd.command('reveal <key-id>'))
      .description("print a default key's secret that was never displayed (after `ready --no-wait`)")
      .action(async (id: string, o: CommonOptions) => {
        const [answer, status] = await withClient(
          o,
          deps,
          async (cl) => [await cl.revealKey(id), await cl.status()] as const,
        );
        if (o.json === true) return printJson(deps.io, answer);
        const key = shown(answer);
        deps.io.out(
          secretBlock(
            colours(deps.io),
            `Key "${key.name}" (id ${key.id}) for instance ${key.instance}:`,
            key.secret,
            shown(status.baseUrl),
          ),
        );
      }),
    'ob-proxy keys reveal 3fA9kQ2mXz1B',
  );

  return cmd;
}

export function makeRevocationsCommand(deps: CliDeps): Command {
  return example(
    withPageOptions(
      withCommon(new Command('revocations'))
        .description('revoked keys, with when and why, oldest first')
        .option('--instance <id>', 'only keys of this instance'),
      'revocations',
    ).action(async (o: CommonOptions & PageFlags & { instance?: string }) => {
      const page = pageOf(o);
      if (page === null) {
        if (o.all === true)
          return withClient(o, deps, (cl) => cl.revocationLines({ instance: o.instance }, lineOut(deps.io)));
        return printJson(deps.io, await withClient(o, deps, (cl) => cl.revocations(o.instance)));
      }
      const answer = await withClient(o, deps, (cl) => cl.revocationPage({ instance: o.instance, ...page }));
      if (o.json === true) return printJson(deps.io, answer);
      const list: RevocationView[] = answer.revocations;
      if (list.length === 0) return deps.io.out('No revocations.\n');
      const c = colours(deps.io);
      deps.io.out(
        table([
          ['REVOKED AT', 'KEY', 'NAME', 'INSTANCE', 'REASON'].map((h) => c.bold(h)),
          ...shown(list).map((r) => [r.revokedAt, r.keyId, r.name, r.instance, r.reason]),
        ]),
      );
      deps.io.out(nextLine('ob-proxy revocations', shown(answer.next), page.limit, list.length));
    }),
    'ob-proxy revocations --instance gpu-1',
    'ob-proxy revocations --all > revocations.jsonl',
  );
}

function statusOf(raw: string | undefined): 'active' | 'revoked' | undefined {
  if (raw === undefined || raw === 'active' || raw === 'revoked') return raw;
  throw new UsageError(`--status must be active or revoked, got "${raw}".`);
}
