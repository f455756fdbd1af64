import { describe, expect, it } from 'vitest';
import { findWholeContext, linesNamingContext } from '../../scripts/whole-context.mjs';

const NARROW = [
  "import type { DaemonBasics, KeyCheckDeps } from '../context.js';",
  "export type KeyStandingDeps = Pick<KeyCheckDeps, 'lifecycle'> & Pick<DaemonBasics, 'clock'>;",
  '// Not the DaemonContext whole: a comment or a string may name it.',
  "export const note = 'DaemonContext';",
].join('\n');

describe('the whole-context check', () => {
  it('refuses a file outside the assembly that takes the whole context, naming its lines', () => {
    const tree: Record<string, string> = {
      'daemon/data-plane/narrow.ts': NARROW,
      'daemon/data-plane/planted.ts': [
        "import type { DaemonContext } from '../context.js';",
        '',
        'export function hook(ctx: DaemonContext): boolean {',
        '  return ctx.draining;',
        '}',
      ].join('\n'),
      'daemon/build-daemon.ts': "import type { DaemonContext } from './context.js';\nlet c: DaemonContext;",
    };
    expect(findWholeContext(Object.keys(tree), (f) => tree[f] ?? '')).toEqual([
      { file: 'daemon/data-plane/planted.ts', lines: [1, 3] },
    ]);
  });

  it('counts a Pick, an alias and a generic argument of the whole as naming it', () => {
    expect(linesNamingContext("type A = Pick<DaemonContext, 'clock'>;")).toEqual([1]);
    expect(linesNamingContext("export type { DaemonContext as Ctx } from './context.js';")).toEqual([1]);
    expect(linesNamingContext('const seen = new WeakMap<\n  DaemonContext,\n  number\n>();')).toEqual([2]);
    expect(linesNamingContext(NARROW)).toEqual([]);
  });
});
