/* global process */
/**
 * Loaded with `node --import` by tests of the CLI's start-up: records every module the process
 * resolves (ESM and CommonJS alike, through module.registerHooks) and, at exit, writes their URLs
 * one a line to the file named by OB_TEST_IMPORTS. Structural, not timed: a test asserts what a
 * command loads, never how long it takes.
 */
import { writeFileSync } from 'node:fs';
import { registerHooks } from 'node:module';

const seen = new Set();
registerHooks({
  resolve(specifier, context, nextResolve) {
    const resolved = nextResolve(specifier, context);
    seen.add(resolved.url);
    return resolved;
  },
});
process.on('exit', () => {
  if (process.env.OB_TEST_IMPORTS) writeFileSync(process.env.OB_TEST_IMPORTS, [...seen].join('\n'));
});
