/**
 * Every string the console draws goes through this Text, never Ink's own (eslint enforces it):
 * names, ids, endpoints and the daemon's messages may hold control characters, and Ink passes
 * OSC and colour sequences through to the terminal. They are drawn as visible escapes
 * (src/printable.ts); nested Text elements are this Text too, so the whole tree is covered.
 */
import { Text as InkText, type TextProps } from 'ink';
import { Children, type ReactNode } from 'react';
import { printable } from '../../../src/printable.js';

export function Text({ children, ...props }: TextProps & { children?: ReactNode }) {
  return <InkText {...props}>{Children.map(children, (c) => (typeof c === 'string' ? printable(c) : c))}</InkText>;
}
