/* global require, process, URL */
/* eslint-disable @typescript-eslint/no-require-imports -- Node 24 starts a single executable's main as CommonJS */
/**
 * The main script of the single executable (`npm run build:binary`, scripts/build-binary.mjs).
 * Node 24 runs it as CommonJS and lets it require only built-in modules, but the program is ES
 * modules (top-level await in bin/ob-proxy.ts and in Ink's yoga-layout) split into chunks so that
 * each command loads only what it needs, as from source. The chunks travel as the executable's
 * assets; module hooks serve them as if they sat in a folder named like the executable
 * (file:///usr/local/bin/ob-proxy/ob-proxy.js), so stack traces name the chunk and line.
 */
const { getAsset } = require('node:sea');
const { registerHooks } = require('node:module');
const { pathToFileURL } = require('node:url');

const base = `${pathToFileURL(process.execPath).href}/`;
// Asset keys are the chunks' paths under esbuild's outdir; the build lists them in this asset.
const chunks = new Set(JSON.parse(getAsset('chunks.json', 'utf8')));

function chunkOf(url) {
  if (!url.startsWith(base)) return null;
  const name = url.slice(base.length);
  return chunks.has(name) ? name : null;
}

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (
      (specifier.startsWith('./') || specifier.startsWith('../')) &&
      context.parentURL !== undefined &&
      context.parentURL.startsWith(base)
    ) {
      const url = new URL(specifier, context.parentURL).href;
      if (chunkOf(url) !== null) return { url, format: 'module', shortCircuit: true };
    }
    if (chunkOf(specifier) !== null) return { url: specifier, format: 'module', shortCircuit: true };
    return nextResolve(specifier, context);
  },
  load(url, context, nextLoad) {
    const name = chunkOf(url);
    if (name === null) return nextLoad(url, context);
    return { format: 'module', source: getAsset(name, 'utf8'), shortCircuit: true };
  },
});

import(`${base}ob-proxy.js`).catch((err) => {
  process.stderr.write(
    `ob-proxy: could not start: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`,
  );
  process.exit(1);
});
