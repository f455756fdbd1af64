/**
 * docs/cli.md against the CLI and the configuration, as errors-docs.test.ts holds docs/errors.md
 * to the error table: every variable src/config.ts reads is in its Environment section, with its
 * flag and default (test-only ones under "For tests"), no variable is documented that nothing reads,
 * and each command's row names exactly the options its `--help` shows.
 */
import { readFile } from 'node:fs/promises';
import type { Command } from 'commander';
import { beforeAll, describe, expect, it } from 'vitest';
import { makeProgram, runCli } from '../../cli/program.js';
import { SETTINGS, type Setting } from '../../src/config.js';
import { shownDefault } from '../../src/config-read.js';
import { FAIL_MODES, HOSTILE_FAIL_MODES } from '../../simulator/sim-types.js';

const settings: Setting[] = Object.values(SETTINGS);
const unused = async (): Promise<never> => {
  throw new Error('not run by this test');
};
const program = makeProgram({
  version: '0.0.0',
  io: { out: () => {}, err: () => {}, isTTY: false, env: {} },
  connect: unused,
  serve: unused,
  simulate: unused,
  demo: unused,
  console: unused,
});

/** The commands that run (not groups such as `instances`), by their path: `instances add`. */
function leaves(cmd: Command, path: string[] = []): [string, Command][] {
  if (cmd.commands.length === 0) return [[path.join(' '), cmd]];
  return cmd.commands.flatMap((sub) => leaves(sub, [...path, sub.name()]));
}

/** Cells of a Markdown table row, split on the pipes that are not escaped. */
function cells(line: string): string[] {
  return line
    .trim()
    .replace(/^\||\|$/g, '')
    .split(/(?<!\\)\|/)
    .map((c) => c.trim());
}

/** The section under a `## ` heading, up to the next one. */
function section(doc: string, heading: string): string {
  const start = doc.indexOf(`\n## ${heading}\n`);
  expect(start, `docs/cli.md has no "## ${heading}"`).toBeGreaterThan(-1);
  const end = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, end === -1 ? undefined : end);
}

let doc: string;
beforeAll(async () => {
  doc = await readFile(new URL('../../docs/cli.md', import.meta.url), 'utf8');
});

describe('docs/cli.md and the environment', () => {
  it('documents every variable the configuration reads, and no other', () => {
    const documented = new Set(doc.match(/OB_PROXY_[A-Z_]+/g));
    expect([...documented].sort()).toEqual(settings.map((s) => s.env).sort());
  });

  it('the Environment section gives each variable its flag and default, the test-only ones apart', () => {
    const env = section(doc, 'Environment');
    const split = env.indexOf('\n### For tests\n');
    expect(split, 'no "### For tests" list').toBeGreaterThan(-1);
    const rows = (part: string): Map<string, string[]> =>
      new Map(
        part
          .split('\n')
          .filter((l) => l.startsWith('| `OB_PROXY_'))
          .map((l) => {
            const c = cells(l);
            return [c[0]!.replace(/`/g, ''), c];
          }),
      );
    const operators = rows(env.slice(0, split));
    const tests = rows(env.slice(split));
    for (const s of settings) {
      const row = (s.forTests === true ? tests : operators).get(s.env);
      expect(row, `${s.env} in the ${s.forTests === true ? '"For tests" list' : "operators' table"}`).toBeDefined();
      expect(row![1]!.replace(/`/g, ''), `${s.env}'s flag`).toBe(s.flag === undefined ? '–' : `--${s.flag}`);
      expect(row![2]!.replace(/`/g, ''), `${s.env}'s default`).toBe(shownDefault(s));
    }
    expect(operators.size + tests.size).toBe(settings.length);
  });
});

describe('docs/cli.md and --help', () => {
  const commands = leaves(program);

  it("serve takes every setting that has a flag (but the client commands' own), and names its variable in --help", () => {
    const serve = commands.find(([p]) => p === 'serve')![1];
    for (const s of settings.filter((x) => x.flag !== undefined && x.clientOnly !== true)) {
      const option = serve.options.find((o) => o.long === `--${s.flag}`);
      expect(option, `serve --${s.flag}`).toBeDefined();
      expect(option!.description).toContain(`env: ${s.env})`);
      expect(option!.envVar, 'commander does not read the variable itself').toBeUndefined();
    }
  });

  it.each(commands.map(([path, cmd]) => [path, cmd] as const))(
    '%s: its row names exactly the options of its --help',
    (path, cmd) => {
      const rows = doc
        .split('\n')
        .filter((l) => l.startsWith('| `'))
        .map(cells)
        .filter((c) => new RegExp(`\`(ob-proxy )?${path}[ \`]`).test(c[0]!));
      expect(
        rows.map((c) => c[0]),
        `one row for ${path}`,
      ).toHaveLength(1);
      const named = new Set(rows[0]![0]!.match(/(?<![\w-])--?[a-z][a-z0-9-]*/g));
      const options = cmd.options.map((o) => ({
        names: [o.long, o.short].filter((n) => n !== undefined),
        common: ['--home', '--socket', '--json'].includes(o.long ?? ''),
      }));
      const missing = options.filter((o) => !o.common && !o.names.some((n) => named.has(n))).map((o) => o.names[0]);
      const unknown = [...named].filter((n) => !options.some((o) => o.names.includes(n)));
      expect({ missing, unknown }).toEqual({ missing: [], unknown: [] });
    },
  );

  it('simulate --fail: --help and the docs name exactly the modes the simulator has, hostile ones apart', () => {
    // The CLI does not import the simulator to list them (--help stays light), so this holds the copy.
    const plain = FAIL_MODES.filter((m) => m !== 'none' && !(HOSTILE_FAIL_MODES as readonly string[]).includes(m));
    const hostile = [...HOSTILE_FAIL_MODES];
    const simulate = commands.find(([p]) => p === 'simulate')![1];
    const help = simulate.options.find((o) => o.long === '--fail')!.description;
    expect(help).toBe(`failure mode: ${plain.join(', ')}; hostile: ${hostile.join(', ')}`);
    const row = doc.split('\n').find((l) => l.startsWith('| `ob-proxy simulate '))!;
    // Words in backticks, but not flags (the hostile part names --body-bytes and --status).
    const listed = (part: string): string[] => [...part.matchAll(/`([a-z][a-z0-9-]*)`/g)].map((m) => m[1]!);
    const [before, after] = row.split('hostile ones:');
    expect(listed(before!.slice(before!.indexOf('`--fail` modes:')))).toEqual(plain);
    expect(listed(after!.slice(0, after!.indexOf('; any knob')))).toEqual(hostile);
  });
});

describe('OB_PROXY_DEBUG does what docs/cli.md says', () => {
  async function failing(env: Record<string, string>): Promise<{ code: number; err: string }> {
    let err = '';
    const code = await runCli(['keys', 'list', '--home', '/nonexistent'], {
      version: '0.0.0',
      io: {
        out: () => {},
        err: (s) => {
          err += s;
        },
        isTTY: false,
        env,
      },
      connect: () => Promise.reject(new Error('an unexpected failure')),
      serve: unused,
      simulate: unused,
      demo: unused,
    });
    return { code, err };
  }

  it('unset: the error line only; set: the stack trace after it, on stderr', async () => {
    expect(await failing({})).toEqual({ code: 1, err: 'error: an unexpected failure\n' });
    const debug = await failing({ OB_PROXY_DEBUG: '1' });
    expect(debug.code).toBe(1);
    expect(debug.err).toMatch(
      /^error: an unexpected failure\nError: an unexpected failure\n {4}at .*cli-docs\.test\.ts/,
    );
  });
});
