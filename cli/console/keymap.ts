/**
 * Every key binding of the console, by where it works. The help overlay (`?`) prints this table
 * and a test checks that docs/console.md lists each row, so the three never drift apart.
 * Kept short: at 80×24 the help shows it in two columns of 39 characters.
 */
export interface Binding {
  keys: string;
  action: string;
}

export interface BindingGroup {
  where: string;
  bindings: Binding[];
}

export const KEYMAP: BindingGroup[] = [
  {
    where: 'Everywhere',
    bindings: [
      { keys: 'Tab S-Tab', action: 'next / previous pane' },
      { keys: '1 2 3', action: 'go to a pane' },
      { keys: '↑ ↓ k j', action: 'move the selection' },
      { keys: 'PgUp PgDn', action: 'move a page' },
      { keys: 'Home End', action: 'first / last row' },
      { keys: 'n', action: 'generate a new key' },
      { keys: '?', action: 'this help' },
      { keys: 'Esc q', action: 'back; on Instances, quit' },
      { keys: 'Ctrl+C', action: 'quit at once' },
    ],
  },
  {
    where: 'Instances',
    bindings: [
      { keys: 'Enter', action: 'keys of the instance' },
      { keys: 's f', action: 'stop / fail (asks first)' },
      { keys: 'e', action: 'extend its pack' },
    ],
  },
  {
    where: 'Keys',
    bindings: [
      { keys: '← →', action: 'previous / next instance' },
      { keys: 'Enter', action: 'show the key' },
      { keys: 'l', action: 'set its limits' },
      { keys: 'o', action: 'rotate (asks first)' },
      { keys: 'x Delete', action: 'revoke (asks first)' },
      { keys: 'r', action: 'reveal an unshown default' },
    ],
  },
  {
    where: 'New key',
    bindings: [
      { keys: '↑ ↓ Enter', action: 'choose a ready instance' },
      { keys: 'Backspace', action: 'delete a character' },
      { keys: 'Ctrl+U', action: 'clear the name' },
      { keys: 'Enter', action: 'generate the key' },
      { keys: 'Esc', action: 'back one step' },
    ],
  },
  {
    where: 'Secret box',
    bindings: [
      { keys: 'c', action: 'copy it (OSC 52 clipboard)' },
      { keys: 'Enter', action: 'saved: forget the secret' },
    ],
  },
  {
    where: 'Confirmations',
    bindings: [
      { keys: 'y', action: 'revoke, stop, fail, rotate' },
      { keys: 'n Esc', action: 'keep it as it is' },
    ],
  },
];
