import type { CliDeps } from './common.js';
import { obError } from '../src/errors.js';

/**
 * Asks before something dies for ever, on a terminal only: a script (no terminal on stdin or
 * stderr) runs as it always did, and `--yes` skips the question. `describe` reads what dies from
 * the daemon, so the question names it; it is called only when there is someone to ask.
 */
export async function confirmed(
  deps: CliDeps,
  yes: boolean | undefined,
  describe: () => Promise<string | null>,
): Promise<void> {
  const ask = deps.io.ask;
  if (yes === true || ask === undefined) return;
  const question = await describe();
  // Nothing would die (an unknown id): the daemon's refusal says why.
  if (question === null) return;
  const answer = (await ask(`${question} [y/N] `)).trim().toLowerCase();
  if (answer === 'y' || answer === 'yes') return;
  throw obError('invalid_argument', {
    message: 'Not confirmed: nothing was changed (pass --yes to skip the question).',
  });
}
