/* global process */
/**
 * `npm pack` / `npm publish` run `prepack` then `postpack` around making the tarball. The
 * checkout's package.json has a `prepare` script (so `npm ci` builds dist/) and an `allowScripts`
 * entry for the `node` devDependency; in a tarball npm 11 warns about both to every user, though
 * neither runs there. `trim` writes the manifest users get (dist/ is already built by prepack)
 * and keeps the checkout's; `restore` puts it back.
 */
import { existsSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const root = resolve(import.meta.dirname, '..');
const manifest = join(root, 'package.json');
const kept = join(root, 'package.json.checkout');

if (process.argv[2] === 'trim') {
  const pkg = JSON.parse(readFileSync(manifest, 'utf8'));
  if (!existsSync(kept)) renameSync(manifest, kept);
  const { scripts: _scripts, devDependencies: _dev, allowScripts: _allow, ...published } = pkg;
  writeFileSync(manifest, `${JSON.stringify(published, null, 2)}\n`);
} else if (process.argv[2] === 'restore') {
  if (existsSync(kept)) renameSync(kept, manifest);
} else {
  process.stderr.write('usage: node scripts/pack-manifest.mjs trim|restore\n');
  process.exit(2);
}
