/* global process */
/**
 * `node scripts/whole-context.mjs`: fails when a file of the shipped code outside the daemon's
 * assembly names `DaemonContext`. Every other file declares the fields it reads as a Pick of the
 * context's parts (daemon/context.ts), so its signature says what it touches and a test can hand
 * it a small fake; a file that took the whole would again reach everything, unseen. Only names in
 * code count (identifiers of the parsed file): a comment or a string may mention it.
 *
 * `findWholeContext(files, read)` is the check itself, on any set of files, so that a test can
 * hand it a file that names the whole and see it refused.
 */
import { readFileSync } from 'node:fs';
import { join, relative, resolve as resolvePath, sep } from 'node:path';
import ts from 'typescript';
import { DIRS, sources } from './import-circles.mjs';

const ROOT = resolvePath(import.meta.dirname, '..');
export { DIRS };

/** Where the context is declared and built, and the two plane builders that hand out its parts. */
export const ASSEMBLY = [
  'daemon/context.ts',
  'daemon/build-context.ts',
  'daemon/build-daemon.ts',
  'daemon/data-plane/build-data-plane.ts',
  'daemon/management/build-management-plane.ts',
];

/** The 1-based lines of `text` where the identifier `DaemonContext` appears in code. */
export function linesNamingContext(text) {
  const source = ts.createSourceFile('file.tsx', text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TSX);
  const lines = new Set();
  const visit = (node) => {
    if (ts.isIdentifier(node) && node.text === 'DaemonContext')
      lines.add(source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return [...lines].sort((a, b) => a - b);
}

/** Each file of `files` outside `assembly` that names the whole context, with the lines it does so on. */
export function findWholeContext(files, read, assembly = ASSEMBLY) {
  const allowed = new Set(assembly);
  const found = [];
  for (const file of files) {
    if (allowed.has(file)) continue;
    const lines = linesNamingContext(read(file));
    if (lines.length > 0) found.push({ file, lines });
  }
  return found;
}

/** The checkout's files that name the whole context, paths relative to it with `/`. */
export function projectWholeContext(root = ROOT) {
  const files = DIRS.flatMap((d) => sources(join(root, d))).map((f) => relative(root, f).split(sep).join('/'));
  return findWholeContext(files, (f) => readFileSync(join(root, f), 'utf8'));
}

if (process.argv[1] !== undefined && resolvePath(process.argv[1]) === import.meta.filename) {
  const found = projectWholeContext();
  for (const { file, lines } of found) process.stdout.write(`${file}:${lines.join(',')}: names DaemonContext\n`);
  if (found.length > 0) {
    process.stdout.write(
      `${found.length} file(s) outside the assembly take the whole DaemonContext: declare the fields they read as a Pick of its parts (daemon/context.ts)\n`,
    );
    process.exitCode = 1;
  }
}
