import { access, readFile, readdir } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * The repository speaks of the product: its pages, and the comments in its code, state what holds
 * and why, never the history of how it came about (sessions, issue numbers, reviews, "this
 * machine"); git keeps that history. And every citation of the contract names a section of
 * docs/contract.md that exists, and every test a page or comment names is there to read.
 */

const ROOT = resolve(import.meta.dirname, '../..');
const SELF = relative(ROOT, import.meta.filename);

/** Pages read whole. */
const PAGES = ['README.md', 'CONTRIBUTING.md', 'bench/README.md'];
const PAGE_DIRS = ['docs'];
/** Code whose comments are read. */
const CODE_DIRS = ['src', 'daemon', 'cli', 'simulator', 'bin', 'bench', 'test', 'scripts'];
const CODE = /\.(ts|tsx|mts|mjs|cjs|js)$/;

/** Words of a team's process, not of the product. */
const PROCESS_WORDS =
  /\bsessions? ?\d|\bissues? ?#?\d|\bstops? \d+\b|\breview|\bhelpers? (session|found)|\bthis (session|machine|branch)\b/i;
/** Citations of documents that are not in the repository. */
const OUTSIDE = /\bCONTRACT\b|\bSPEC(\.md| ?§| ?\d)|\bprotocol\.md\b/;
const CITATION = /contract\.md §(\d+(?:\.\d+)*)/g;

async function files(dir: string, match: RegExp): Promise<string[]> {
  const entries = await readdir(join(ROOT, dir), { recursive: true, withFileTypes: true });
  return entries
    .filter((e) => e.isFile() && match.test(e.name))
    .map((e) => relative(ROOT, join(e.parentPath, e.name)))
    .filter((f) => !f.startsWith('bench/results/') && !f.includes('node_modules'));
}

/** The comments of a source file, each with its line, as TypeScript's scanner reads them. */
function comments(text: string, file: string): { line: number; text: string }[] {
  const variant = file.endsWith('.tsx') ? ts.LanguageVariant.JSX : ts.LanguageVariant.Standard;
  const scanner = ts.createScanner(ts.ScriptTarget.Latest, false, variant, text);
  const out: { line: number; text: string }[] = [];
  // The scanner alone reads the `}` that ends a template's `${…}` as a brace, and the rest of the
  // template as the start of a new one that swallows the code (and comments) after it: a stack
  // of open braces tells a template's `}` apart, and it is scanned again as the template's.
  const open: ('brace' | 'template')[] = [];
  for (let kind = scanner.scan(); kind !== ts.SyntaxKind.EndOfFileToken; kind = scanner.scan()) {
    if (kind === ts.SyntaxKind.OpenBraceToken) open.push('brace');
    else if (kind === ts.SyntaxKind.TemplateHead) open.push('template');
    else if (kind === ts.SyntaxKind.CloseBraceToken && open.pop() === 'template') {
      if (scanner.reScanTemplateToken(false) === ts.SyntaxKind.TemplateMiddle) open.push('template');
    }
    if (kind === ts.SyntaxKind.SingleLineCommentTrivia || kind === ts.SyntaxKind.MultiLineCommentTrivia) {
      const start = scanner.getTokenStart();
      const line = text.slice(0, start).split('\n').length;
      scanner
        .getTokenText()
        .split('\n')
        .forEach((t, i) => out.push({ line: line + i, text: t }));
    }
  }
  return out;
}

/** A test named by path: `test/unit/config-resolve.test.ts`. */
const TEST_PATH = /\btest\/[\w./-]+\.test\.tsx?\b/g;
/** A test named by tier and name, as the pages' tables do: `unit/config-resolve`, `e2e/store-files`. */
const TEST_NAME = /`((?:unit|inproc|e2e|reliability|simulate|conformance|console|package|soak)\/[\w./-]+)`/g;

async function exists(path: string): Promise<boolean> {
  return access(join(ROOT, path)).then(
    () => true,
    () => false,
  );
}

/** Where a test named by tier and name may be: its file, or a folder. */
function placesOf(name: string): string[] {
  const base = `test/${name}`;
  return [`${base}.test.ts`, `${base}.test.tsx`, base];
}

/** Every line the rule applies to: whole pages, and the comments of the code. */
async function readable(): Promise<{ where: string; text: string }[]> {
  const lines: { where: string; text: string }[] = [];
  const pages = [...PAGES, ...(await Promise.all(PAGE_DIRS.map((d) => files(d, /\.md$/)))).flat()];
  for (const f of pages)
    (await readFile(join(ROOT, f), 'utf8'))
      .split('\n')
      .forEach((text, i) => lines.push({ where: `${f}:${i + 1}`, text }));
  const code = (await Promise.all(CODE_DIRS.map((d) => files(d, CODE)))).flat().filter((f) => f !== SELF);
  for (const f of code)
    for (const c of comments(await readFile(join(ROOT, f), 'utf8'), f))
      lines.push({ where: `${f}:${c.line}`, text: c.text });
  return lines;
}

/** The section numbers of docs/contract.md: "## 3. The data plane" is 3, "### 3.1 Check order" is 3.1. */
async function contractSections(): Promise<Set<string>> {
  const doc = await readFile(join(ROOT, 'docs/contract.md'), 'utf8');
  return new Set([...doc.matchAll(/^#{2,4} (\d+(?:\.\d+)*)\.? /gm)].map((m) => m[1]!));
}

describe('the repository speaks of the product', () => {
  it('no page or comment names sessions, issue numbers, reviews or "this machine"', async () => {
    const found = (await readable())
      .filter((l) => PROCESS_WORDS.test(l.text))
      .map((l) => `${l.where}: ${l.text.trim()}`);
    expect(found).toEqual([]);
  });

  it('no page or comment cites a document that is not in the repository', async () => {
    const found = (await readable()).filter((l) => OUTSIDE.test(l.text)).map((l) => `${l.where}: ${l.text.trim()}`);
    expect(found).toEqual([]);
  });

  it('every test a page or comment names exists', async () => {
    const lines = await readable();
    const named = lines.flatMap((l) => [
      ...[...l.text.matchAll(TEST_PATH)].map((m) => ({ where: l.where, name: m[0], places: [m[0]] })),
      ...[...l.text.matchAll(TEST_NAME)].map((m) => ({ where: l.where, name: m[1]!, places: placesOf(m[1]!) })),
    ]);
    expect(named.length).toBeGreaterThan(100);
    const missing: string[] = [];
    for (const n of named)
      if (!(await Promise.all(n.places.map(exists))).some(Boolean)) missing.push(`${n.where}: ${n.name}`);
    expect(missing).toEqual([]);
  });

  it('every citation of docs/contract.md names a section that exists', async () => {
    const sections = await contractSections();
    expect(sections).toContain('3.1');
    const citations = (await readable()).flatMap((l) =>
      [...l.text.matchAll(CITATION)].map((m) => ({ ...l, section: m[1]! })),
    );
    expect(citations.length).toBeGreaterThan(20);
    expect(citations.filter((c) => !sections.has(c.section)).map((c) => `${c.where}: §${c.section}`)).toEqual([]);
  });
});
