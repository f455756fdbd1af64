import { resolve } from 'node:path';
import type { ChalkInstance } from 'chalk';
import { Command } from 'commander';
import type { InstanceView } from '../../src/wire/views.js';
import { type CliDeps, type CommonOptions, example, withClient, withCommon } from '../common.js';
import { confirmed } from '../confirm.js';
import { DOOM, type DoomedMove } from '../questions.js';
import type { DaemonClient } from '../daemon-client.js';
import { colours, printJson, secretBlock, shown, stateColour, table } from '../output.js';
import { parsePackEnds } from '../pack-ends.js';
import { addAliasCommand, aliasesText } from './instances-alias.js';
import {
  type WaitOptions,
  confirmationJson,
  confirmedLine,
  unconfirmedError,
  waitBound,
  waitConfirmed,
  withWaitOptions,
} from '../wait-confirmed.js';

const PACK_ENDS_HELP =
  'when the paid uptime ends: an ISO 8601 time (2026-12-01T18:00:00Z) or a duration from now (+8h, +30d)';

async function confirmDoom(
  deps: CliDeps,
  o: CommonOptions & { yes?: boolean },
  cl: DaemonClient,
  id: string,
  action: DoomedMove,
): Promise<void> {
  await confirmed(deps, o.yes, async () => DOOM[action](shown(await cl.getInstance(id))));
}

/** The daemon may run elsewhere in the tree: send it an absolute path. */
function absolute(path: string | undefined): string | undefined {
  return path === undefined ? undefined : resolve(path);
}

function timeLeft(packEndsAt: string | null): string {
  if (packEndsAt === null) return '-';
  const ms = Date.parse(packEndsAt) - Date.now();
  if (ms <= 0) return `${packEndsAt} (ended)`;
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor((ms % 3_600_000) / 60_000);
  return `${packEndsAt} (${h > 0 ? `${h}h ` : ''}${m}m left)`;
}

/** The last probe's status; '-' when none applies (not ready, or probes off). */
function healthText(c: ChalkInstance, h: InstanceView['health'] | undefined): string {
  if (h == null) return '-';
  return h.status === 'reachable' ? c.green(h.status) : c.red(h.status);
}

function render(
  deps: CliDeps,
  opts: CommonOptions,
  answer: InstanceView | InstanceView[],
  line?: (i: InstanceView) => string,
): void {
  const { io } = deps;
  if (opts.json === true) return printJson(io, answer);
  const value = shown(answer);
  const c = colours(io);
  if (Array.isArray(value)) {
    if (value.length === 0)
      return io.out('No instances. Add one with `ob-proxy instances add <id> --model <model> --endpoint <url>`.\n');
    io.out(
      table([
        ['ID', 'MODEL', 'ALIASES', 'STATE', 'HEALTH', 'KEYS', 'ENDPOINT', 'PACK ENDS'].map((h) => c.bold(h)),
        ...value.map((i) => [
          i.id,
          i.model,
          aliasesText(i, 3),
          stateColour(c, i.state),
          healthText(c, i.health),
          String(i.activeKeys),
          i.endpoint ?? '-',
          timeLeft(i.packEndsAt),
        ]),
      ]),
    );
    return;
  }
  if (line !== undefined) return io.out(`${line(value)}\n`);
  io.out(
    table([
      ['id', value.id],
      ['model', value.model],
      ['aliases', aliasesText(value)],
      ['state', stateColour(c, value.state)],
      ['endpoint', value.endpoint ?? '-'],
      ['health', healthText(c, value.health)],
      ...(value.health?.error == null ? [] : [['probe error', value.health.error]]),
      ['pack ends', timeLeft(value.packEndsAt)],
      ['active keys', String(value.activeKeys)],
      ['created', value.createdAt],
      ['updated', value.updatedAt],
    ]),
  );
}

/**
 * A move that revokes every key of the instance: asked first on a terminal, and with --wait,
 * followed until every live daemon of the store refuses those keys.
 */
async function revokingMove(
  deps: CliDeps,
  o: CommonOptions & WaitOptions & { yes?: boolean },
  id: string,
  action: DoomedMove,
  move: (cl: DaemonClient) => Promise<InstanceView>,
  line: (i: InstanceView) => string,
): Promise<void> {
  const bound = waitBound(o, deps);
  const [inst, confirmation] = await withClient(o, deps, async (cl) => {
    await confirmDoom(deps, o, cl, id, action);
    const moved = await move(cl);
    return [moved, bound === null ? null : await waitConfirmed(cl, { instance: moved.id }, bound)] as const;
  });
  if (confirmation === null) render(deps, o, inst, line);
  else if (o.json === true) printJson(deps.io, { ...inst, confirmation: confirmationJson(confirmation) });
  else {
    render(deps, o, inst, line);
    if (confirmation.view.confirmed) deps.io.out(confirmedLine(shown(confirmation)));
  }
  if (confirmation !== null && !confirmation.view.confirmed) throw unconfirmedError(shown(confirmation), bound!);
}

export function makeInstancesCommand(deps: CliDeps): Command {
  const cmd = new Command('instances').description('register model instances and move them through their states');

  example(
    withCommon(cmd.command('add <id>'))
      .description('register an instance (state pending)')
      .requiredOption('--model <model>', 'model id the instance runs: one `ob-proxy models list` shows')
      .option('--endpoint <url>', "model server's base URL, e.g. http://10.0.0.5:11434")
      .option('--pack-ends <time>', PACK_ENDS_HELP)
      .option(
        '--upstream-token-file <path>',
        "file holding the model server's bearer token (e.g. vLLM --api-key), read by the daemon",
      )
      .action(
        async (
          id: string,
          o: CommonOptions & { model: string; endpoint?: string; packEnds?: string; upstreamTokenFile?: string },
        ) => {
          const inst = await withClient(o, deps, (cl) =>
            cl.addInstance({
              id,
              model: o.model,
              endpoint: o.endpoint,
              packEndsAt: o.packEnds === undefined ? undefined : parsePackEnds(o.packEnds, Date.now()),
              upstreamTokenFile: absolute(o.upstreamTokenFile),
            }),
          );
          render(
            deps,
            o,
            inst,
            (i) =>
              `Added instance ${i.id} (${i.model}), state pending. Make it ready with \`ob-proxy instances ready ${i.id}${i.endpoint === null ? ' --endpoint <url>' : ''}\`.`,
          );
          if (o.json !== true && inst.modelNotServed !== undefined)
            deps.io.out(
              `Note: ${shown(inst.modelNotServed)}. \`instances ready\` refuses until it does: pull or load the model there, or check the id.\n`,
            );
        },
      ),
    'ob-proxy instances add gpu-1 --model gemma4:26b --endpoint http://10.0.0.5:11434 --pack-ends +8h',
  );

  example(
    withCommon(cmd.command('ready <id>'))
      .description('mark an instance ready; prints its default key once')
      .option('--endpoint <url>', "model server's base URL (required if not given before)")
      .option('--upstream-token-file <path>', "file holding the model server's bearer token, read by the daemon")
      .option('--no-wait', 'return at once; reveal the default key later with `keys reveal` or the console')
      .option('--no-probe', 'do not check first that the endpoint answers GET /v1/models and serves the model')
      .action(
        async (
          id: string,
          o: CommonOptions & { endpoint?: string; upstreamTokenFile?: string; wait: boolean; probe: boolean },
        ) => {
          const [answer, status] = await withClient(
            o,
            deps,
            async (cl) =>
              [
                await cl.ready(id, {
                  endpoint: o.endpoint,
                  upstreamTokenFile: absolute(o.upstreamTokenFile),
                  wait: o.wait,
                  probe: o.probe,
                }),
                await cl.status(),
              ] as const,
          );
          if (o.json === true) return printJson(deps.io, answer);
          const view = shown(answer);
          const c = colours(deps.io);
          deps.io.out(`Instance ${view.id} is ready (${view.model} at ${view.endpoint}).\n`);
          if (view.defaultKey?.secret != null) {
            deps.io.out(
              '\n' +
                secretBlock(
                  c,
                  `Default key "${view.defaultKey.name}" (id ${view.defaultKey.id}):`,
                  view.defaultKey.secret,
                  shown(status.baseUrl),
                ),
            );
          } else if (!o.wait) {
            deps.io.out(
              'The default key is being created; reveal it once with `ob-proxy keys reveal <key-id>` (see `ob-proxy keys list`) or in the console.\n',
            );
          } else {
            deps.io.out('Its keys are still active; no new default key was made.\n');
          }
        },
      ),
    'ob-proxy instances ready gpu-1 --endpoint http://10.0.0.5:11434',
    'ob-proxy instances ready gpu-1 --no-wait --json',
    'ob-proxy instances ready gpu-1 --no-probe',
  );

  example(
    withCommon(cmd.command('pending <id>'))
      .description('move a ready instance back to pending (keys stay active, answered 409 until ready)')
      .action(async (id: string, o: CommonOptions) => {
        const inst = await withClient(o, deps, (cl) => cl.move(id, 'pending'));
        render(
          deps,
          o,
          inst,
          (i) =>
            `Instance ${i.id} is now ${i.state}. Its ${i.activeKeys} key(s) stay active and answer 409 until it is ready.`,
        );
      }),
    'ob-proxy instances pending gpu-1',
  );

  const halts = [
    ['stop', 'stop the instance and revoke all its keys for ever'],
    ['fail', 'mark the instance failed and revoke all its keys for ever'],
    ['terminate', 'terminate the instance and revoke all its keys for ever'],
  ] as const;
  for (const [action, description] of halts) {
    example(
      withWaitOptions(
        withCommon(cmd.command(`${action} <id>`))
          .description(`${description} (asks first on a terminal)`)
          .option('-y, --yes', 'do not ask for confirmation'),
      ).action(async (id: string, o: CommonOptions & WaitOptions & { yes?: boolean }) => {
        await revokingMove(
          deps,
          o,
          id,
          action,
          (cl) => cl.move(id, action),
          (i) => `Instance ${i.id} is now ${i.state}. All its keys are revoked.`,
        );
      }),
      `ob-proxy instances ${action} gpu-1`,
      `ob-proxy instances ${action} gpu-1 --yes --wait`,
    );
  }

  example(
    withCommon(cmd.command('extend <id>'))
      .description('extend the pack: same id, keys untouched')
      .requiredOption('--pack-ends <time>', PACK_ENDS_HELP)
      .option('--shorten', 'allow an end sooner than the current one (its keys are revoked then)')
      .action(async (id: string, o: CommonOptions & { packEnds: string; shorten?: boolean }) => {
        const packEndsAt = parsePackEnds(o.packEnds, Date.now());
        const inst = await withClient(o, deps, (cl) => cl.extend(id, packEndsAt, o.shorten === true));
        render(
          deps,
          o,
          inst,
          (i) => `Pack of ${i.id} now ends ${i.packEndsAt}; its ${i.activeKeys} key(s) keep working.`,
        );
      }),
    'ob-proxy instances extend gpu-1 --pack-ends +30d',
    'ob-proxy instances extend gpu-1 --pack-ends 2026-12-24T18:00:00Z',
  );

  addAliasCommand(cmd, deps);

  example(
    withWaitOptions(
      withCommon(cmd.command('remove <id>'))
        .description('revoke all its keys and forget the instance (its keys then answer 404; asks first on a terminal)')
        .option('-y, --yes', 'do not ask for confirmation'),
    ).action(async (id: string, o: CommonOptions & WaitOptions & { yes?: boolean }) => {
      await revokingMove(
        deps,
        o,
        id,
        'remove',
        (cl) => cl.remove(id),
        (i) => `Removed instance ${i.id}. All its keys are revoked; they answer 404 deployment_not_found.`,
      );
    }),
    'ob-proxy instances remove gpu-1',
    'ob-proxy instances remove gpu-1 --yes --wait',
  );

  example(
    withCommon(cmd.command('list'))
      .description('list instances with model, aliases, state, endpoint, pack end, active keys')
      .option('--state <state>', 'only this state: pending, ready, stopped, failed, terminated')
      .action(async (o: CommonOptions & { state?: string }) => {
        render(deps, o, await withClient(o, deps, (cl) => cl.listInstances(o.state)));
      }),
    'ob-proxy instances list --state ready',
  );

  example(
    withCommon(cmd.command('show <id>'))
      .description('show one instance')
      .action(async (id: string, o: CommonOptions) => {
        render(deps, o, await withClient(o, deps, (cl) => cl.getInstance(id)));
      }),
    'ob-proxy instances show gpu-1 --json',
  );

  return cmd;
}
