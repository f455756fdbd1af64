/**
 * OSC 52 asks the terminal to put text on the system clipboard. Terminals that do not support
 * it (or tmux with `set-clipboard` off) ignore it silently, so the console always says how to
 * copy by hand as well. The sequence is written straight to the terminal, never logged.
 */
export function osc52(text: string): string {
  return `\u001b]52;c;${Buffer.from(text, 'utf8').toString('base64')}\u0007`;
}
