/**
 * Colour is a choice of the console, not of chalk: chalk ignores NO_COLOR, so every colour in
 * the console comes from here and is dropped when colour is off (NO_COLOR or not a TTY).
 */
import { createContext, useContext } from 'react';
import type { InstanceView } from '../../src/wire/views.js';

export type Tone = 'good' | 'warn' | 'bad' | 'muted' | 'accent' | 'secret';

const TONES: Record<Tone, string> = {
  good: 'green',
  warn: 'yellow',
  bad: 'red',
  muted: 'gray',
  accent: 'cyan',
  secret: 'yellowBright',
};

export const ColourContext = createContext<boolean>(true);

/** Returns an Ink `color` for a tone, or undefined when colour is off. */
export function useTone(): (tone: Tone) => string | undefined {
  const on = useContext(ColourContext);
  return (tone) => (on ? TONES[tone] : undefined);
}

export function stateTone(state: InstanceView['state']): Tone {
  switch (state) {
    case 'ready': return 'good';
    case 'pending': return 'warn';
    case 'stopped': return 'muted';
    case 'failed':
    case 'terminated': return 'bad';
  }
}

/** NO_COLOR (any non-empty value) or a non-terminal turns colour off (no-color.org). */
export function colourWanted(env: Readonly<Record<string, string | undefined>>, isTTY: boolean): boolean {
  return isTTY && (env.NO_COLOR === undefined || env.NO_COLOR === '');
}
