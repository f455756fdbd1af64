/* global require, process */
/* eslint-disable @typescript-eslint/no-require-imports -- internal/ modules are reachable only through require (with --expose-internals) */
// Preloaded (--require, with --expose-internals) by test/e2e/async-context-frame.test.ts: writes
// to OB_TEST_ACF the stack from which Node decides whether async context frames are on (it asks
// for the option then, once: --async-context-frame on Node 24, on by default;
// --experimental-async-context-frame on Node 22, off by default but decided at the same point).
const options = require('internal/options');
const get = options.getOptionValue;
const FRAME_OPTIONS = new Set(['--async-context-frame', '--experimental-async-context-frame']);
options.getOptionValue = function (name) {
  if (FRAME_OPTIONS.has(name)) require('node:fs').writeFileSync(process.env.OB_TEST_ACF, new Error().stack);
  return get.apply(this, arguments);
};
