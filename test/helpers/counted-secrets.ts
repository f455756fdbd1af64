/**
 * The secrets of the first two keys a daemon built in process makes: `countingSecrets`
 * (test/helpers/inproc.ts) gives the same ones on every run, so outputs can be compared whole.
 */

/** Key k00000000001, an instance's default key when it is the first key made. */
export const DEFAULT_SECRET = 'ob_sk_k00000000001_r00000000000000000000000000000010EdnTO';
/** Key k00000000002. */
export const BOT_SECRET = 'ob_sk_k00000000002_r00000000000000000000000000000024Y3TlC';
