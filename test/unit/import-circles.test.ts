import { posix } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findCircles, importsOf } from '../../scripts/import-circles.mjs';

/** Files given as text, resolved as relative paths the way NodeNext writes them (`./x.js` is `x.ts`). */
function check(tree: Record<string, string>): string[][] {
  const resolveImport = (spec: string, from: string): string | undefined =>
    spec.startsWith('.') ? posix.join(posix.dirname(from), spec).replace(/\.js$/, '.ts') : undefined;
  return findCircles(Object.keys(tree), (f) => tree[f] ?? '', resolveImport);
}

describe('the import-circle check', () => {
  it('reads value imports, type imports, re-exports and dynamic imports alike', () => {
    const text = [
      "import { a } from './a.js';",
      "import type { B } from './b.js';",
      "export { c } from './c.js';",
      "export type { D } from './d.js';",
      "const e = await import('./e.js');",
      "import { type F } from 'node:fs';",
    ].join('\n');
    expect(importsOf(text)).toEqual(['./a.js', './b.js', './c.js', './d.js', './e.js', 'node:fs']);
  });

  it('refuses a circle closed by a type import alone', () => {
    const circles = check({
      'd/context.ts': "import { hook } from './hook.js';\nexport interface Ctx { n: number }\n",
      'd/hook.ts': "import type { Ctx } from './context.js';\nexport const hook = (c: Ctx) => c.n;\n",
      'd/leaf.ts': "import { hook } from './hook.js';\n",
    });
    expect(circles).toEqual([['d/context.ts', 'd/hook.ts']]);
  });

  it('finds a long circle and a file that imports itself, and nothing in a tree', () => {
    const circles = check({
      'a.ts': "import './b.js';",
      'b.ts': "import './c.js';",
      'c.ts': "export * from './a.js';",
      'self.ts': "import './self.js';",
      'tree.ts': "import './a.js';\nimport './leaf.js';",
      'leaf.ts': '',
    });
    expect(circles).toEqual([['self.ts'], ['a.ts', 'b.ts', 'c.ts']]);
    expect(check({ 'x.ts': "import './y.js';", 'y.ts': "import 'node:fs';" })).toEqual([]);
  });
});
