/* global process */
/**
 * `node scripts/import-circles.mjs`: fails when a module of the shipped code reaches itself again
 * through its imports. Every import counts, `import type` and `export … from` included: a circle
 * closed by a type alone still means two files that cannot be read, changed or moved one without
 * the other, and it becomes a real one the day a value follows the type. Imports are resolved as
 * TypeScript resolves them (the project's own compiler options), so `./x.js` finds `./x.ts`.
 *
 * `findCircles(files, read, resolve)` is the check itself, on any set of files, so that a test can
 * hand it a circle and see it refused.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join, relative, resolve as resolvePath } from 'node:path';
import ts from 'typescript';

const ROOT = resolvePath(import.meta.dirname, '..');
export const DIRS = ['src', 'daemon', 'cli', 'simulator'];

/** The modules each file imports, as written (`import`, `import type`, `export … from`, `import()`). */
export function importsOf(text) {
  return ts.preProcessFile(text, true, true).importedFiles.map((f) => f.fileName);
}

/**
 * The strongly connected components of more than one file (or a file importing itself), each as
 * a list of files in the order a path around it takes, smallest first. Tarjan's algorithm,
 * iterative, so a deep import chain cannot overflow the stack.
 */
export function findCircles(files, read, resolveImport) {
  const known = new Set(files);
  const edges = new Map();
  for (const file of files) {
    const targets = new Set();
    for (const spec of importsOf(read(file))) {
      const target = resolveImport(spec, file);
      if (target !== undefined && known.has(target)) targets.add(target);
    }
    edges.set(file, [...targets].sort());
  }
  const index = new Map();
  const low = new Map();
  const onStack = new Set();
  const stack = [];
  const circles = [];
  let next = 0;
  for (const start of files) {
    if (index.has(start)) continue;
    const work = [[start, 0]];
    index.set(start, next);
    low.set(start, next);
    next += 1;
    stack.push(start);
    onStack.add(start);
    while (work.length > 0) {
      const frame = work[work.length - 1];
      const [node, i] = frame;
      const out = edges.get(node);
      if (i < out.length) {
        frame[1] = i + 1;
        const to = out[i];
        if (!index.has(to)) {
          index.set(to, next);
          low.set(to, next);
          next += 1;
          stack.push(to);
          onStack.add(to);
          work.push([to, 0]);
        } else if (onStack.has(to)) {
          low.set(node, Math.min(low.get(node), index.get(to)));
        }
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1][0];
        low.set(parent, Math.min(low.get(parent), low.get(node)));
      }
      if (low.get(node) === index.get(node)) {
        const component = [];
        let member;
        do {
          member = stack.pop();
          onStack.delete(member);
          component.push(member);
        } while (member !== node);
        if (component.length > 1 || edges.get(node).includes(node)) circles.push(component.sort());
      }
    }
  }
  return circles.sort((a, b) => a.length - b.length || (a[0] < b[0] ? -1 : 1));
}

/** The TypeScript sources under `dir`, declarations left out, sorted. */
export function sources(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => {
      const path = join(dir, e.name);
      if (e.isDirectory()) return sources(path);
      return /\.tsx?$/.test(e.name) && !e.name.endsWith('.d.ts') ? [path] : [];
    })
    .sort();
}

/** The shipped code's circles, with paths relative to the checkout. */
export function projectCircles(root = ROOT) {
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  const options = config.options;
  const host = ts.createCompilerHost(options);
  const files = DIRS.flatMap((d) => sources(join(root, d)));
  const resolveImport = (spec, from) =>
    ts.resolveModuleName(spec, from, options, host).resolvedModule?.resolvedFileName;
  return findCircles(files, (f) => readFileSync(f, 'utf8'), resolveImport).map((c) => c.map((f) => relative(root, f)));
}

if (process.argv[1] !== undefined && resolvePath(process.argv[1]) === import.meta.filename) {
  const circles = projectCircles();
  for (const circle of circles) {
    process.stdout.write(`import circle of ${circle.length} files:\n${circle.map((f) => `  ${f}\n`).join('')}`);
  }
  if (circles.length > 0) {
    process.stdout.write(
      `${circles.length} import circle(s): move the shared types into a module that imports none of them\n`,
    );
    process.exitCode = 1;
  }
}
