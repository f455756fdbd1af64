/**
 * A CLI run's outcome as tests compare it whole (test/helpers/inproc-cli.ts `CliRun`): exit 0
 * with its stdout, or a refusal: its exit code, stdout empty, and one `error:` line on stderr.
 */

export const ok = (stdout: string): unknown => ({ code: 0, stdout, stderr: '' });

export const refused = (code: number, message: string): unknown => ({
  code,
  stdout: '',
  stderr: `error: ${message}\n`,
});
