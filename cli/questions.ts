import type { InstanceView, KeyView } from '../src/wire/views.js';

/**
 * The questions asked before a change that cannot be undone, said once for the CLI and the
 * console, so both ask the same thing about the same change.
 */
export type DoomedMove = 'stop' | 'fail' | 'terminate' | 'remove';

function keysOf(i: InstanceView): string {
  return i.activeKeys === 1 ? 'its 1 active key' : `its ${i.activeKeys} active keys`;
}

/** What a move that revokes every key of the instance asks first. */
export const DOOM: Record<DoomedMove, (i: InstanceView) => string> = {
  stop: (i) => `Stop instance ${i.id} (${i.model}) and revoke ${keysOf(i)} for ever?`,
  fail: (i) => `Mark instance ${i.id} (${i.model}) failed and revoke ${keysOf(i)} for ever?`,
  terminate: (i) => `Terminate instance ${i.id} (${i.model}) for good and revoke ${keysOf(i)} for ever?`,
  remove: (i) =>
    `Remove instance ${i.id} (${i.model}): revoke ${keysOf(i)} for ever (they answer 404) and forget the record?`,
};

/** What `keys rotate` asks first; `grace` as the operator typed it, or undefined (none). */
export function rotateQuestion(k: KeyView, grace: string | undefined): string {
  return `Rotate key "${k.name}" (${k.hint}) of instance ${k.instance}? Its secret stops working ${grace === undefined ? 'now' : `in ${grace}`}.`;
}
