/* global console, process */
/**
 * `node bench/without-fixes.mjs DIR [--commit REF]`: a checkout of REF (HEAD) at DIR with the
 * request-path work of issue 10's fixes taken out, built, for `npm run bench -- --baseline DIR`:
 * what the fixes cost, measured against the same code without them rather than against an old
 * commit that differs in everything merged since. Taken out: the re-check of key and deployment
 * once the body is in, the in-flight registry that lets a revocation end a request, the response
 * deadlines, the cap on a plain answer's size, and the body checks of the JSON-key fix (UTF-8,
 * repeated keys, nesting depth, case-folded field names). Each edit must find the text it
 * replaces, so a change to those lines stops this script instead of measuring something else.
 * The checkout is a bench artefact only: it accepts what main refuses.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values: a, positionals } = parseArgs({
  allowPositionals: true,
  options: { commit: { type: 'string', default: 'HEAD' } },
});
if (positionals.length !== 1) {
  console.error('usage: node bench/without-fixes.mjs DIR [--commit REF]');
  process.exit(2);
}
const ROOT = resolve(import.meta.dirname, '..');
const dir = resolve(positionals[0]);

/** [file, text, replacement]: each text must occur exactly once. */
const EDITS = [
  [
    'daemon/data-plane/auth-hook.ts',
    'export function recheck(ctx: DaemonContext, request: FastifyRequest): Refusal | null {\n',
    'export function recheck(ctx: DaemonContext, request: FastifyRequest): Refusal | null {\n  if (ctx !== null) return null;\n',
  ],
  [
    'daemon/data-plane/deadlines.ts',
    '  add(node: DeadlineNode, afterMs: number): void {\n',
    '  add(node: DeadlineNode, afterMs: number): void {\n    if (afterMs >= 0) return;\n',
  ],
  [
    'daemon/data-plane/deadlines.ts',
    '  remove(node: DeadlineNode): void {\n',
    '  remove(node: DeadlineNode): void {\n    if (node !== null) return;\n',
  ],
  [
    'daemon/data-plane/inflight.ts',
    '  add(key: KeyRecord, node: InflightNode): void {\n',
    '  add(key: KeyRecord, node: InflightNode): void {\n    if (key !== null) return;\n',
  ],
  ['src/wire/json-body.ts', '  if (!isUtf8(raw))', '  if (raw.length < 0 && !isUtf8(raw))'],
  ['src/wire/json-body.ts', '  const written = scanMembers(text);', '  const written = 0;'],
  [
    'src/wire/json-body.ts',
    '  if (countMembers(parsed, 0) !== written) {',
    '  if (written !== 0 && countMembers(parsed, 0) !== written) {',
  ],
  [
    'src/wire/chat-request.ts',
    '  checkNames(body);\n  return body;',
    '  if (raw.length < 0) checkNames(body);\n  return body;',
  ],
  [
    'daemon/data-plane/upstream-relay.ts',
    '    if (this.bytes > this.c.limits.maxAnswerBytes) this.tooLarge();\n    else this.chunks.push(chunk);',
    '    this.chunks.push(chunk);',
  ],
];

if (existsSync(dir)) {
  console.error(`${dir} exists: give a new directory`);
  process.exit(2);
}
execFileSync('git', ['-C', ROOT, 'worktree', 'add', '--detach', dir, a.commit], { stdio: 'inherit' });
for (const [file, from, to] of EDITS) {
  const path = join(dir, file);
  const text = readFileSync(path, 'utf8');
  const n = text.split(from).length - 1;
  if (n !== 1) throw new Error(`${file}: expected the text to take out once, found it ${n} times:\n${from}`);
  writeFileSync(path, text.replace(from, to));
}
symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
// The edits make some code unreachable, which the type checker reports; the output is what counts.
try {
  execFileSync(join(ROOT, 'node_modules/.bin/tsc'), ['-p', 'tsconfig.build.json'], { cwd: dir, stdio: 'ignore' });
} catch {
  // emitted all the same (no noEmitOnError)
}
// The build holds the edits (a stale or failed output would measure main against itself).
if (!readFileSync(join(dir, 'dist/src/wire/json-body.js'), 'utf8').includes('const written = 0'))
  throw new Error(`${dir}/dist was not built from the edited sources`);
console.log(`built ${dir}: ${EDITS.length} edits; now npm run bench -- --baseline ${dir}`);
console.log(`remove it with: git worktree remove --force ${dir}`);
