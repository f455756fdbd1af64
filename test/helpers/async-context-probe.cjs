/* global require, process */
/* eslint-disable @typescript-eslint/no-require-imports -- internal/ modules are reachable only through require (with --expose-internals) */
// Preloaded (--require, with --expose-internals) by test/e2e/async-context-frame.test.ts: writes
// to OB_TEST_ACF the stack from which Node turns its async context frames on (it asks for the
// --async-context-frame option then, once).
const options = require('internal/options');
const get = options.getOptionValue;
options.getOptionValue = function (name) {
  if (name === '--async-context-frame') require('node:fs').writeFileSync(process.env.OB_TEST_ACF, new Error().stack);
  return get.apply(this, arguments);
};
