/**
 * New key, in three steps: choose a ready instance, name the key, generate. The name is checked
 * as the daemon checks it (validateKeyName from src/), so what the console accepts the daemon
 * accepts. The secret itself is shown by the SecretBox, never here.
 *
 *   New key · 1 instance › 2 name › 3 secret
 *   › gpu-1   gemma4:26b   ready
 *     gpu-2   qwen3.6:27b  stopped   gpu-2 is stopped and its keys were revoked: …
 *
 *   New key for gpu-1 (gemma4:26b) · 1 instance › 2 name › 3 secret
 *   Name: ci-bot█                                                    6/64
 */
import { Box, useInput } from 'ink';
import { Text } from '../components/text.js';
import { useState } from 'react';
import { KEY_NAME_MAX, validateKeyName } from '../../../src/domain/validate.js';
import type { InstanceView, KeyView } from '../../../src/wire/views.js';
import { cells, fit, whyNotReady, whyNotShort } from '../format.js';
import { stateTone, useTone } from '../theme.js';

export interface GenerateKeyProps {
  instances: InstanceView[];
  keys: KeyView[];
  /** The instance to start on, when it is ready. */
  preselect: string | null;
  width: number;
  /** Creates the key; rejects with the daemon's error, which is shown on the name step. */
  onGenerate(instance: string, name: string): Promise<void>;
  onCancel(): void;
}

type Step = { step: 'choose' } | { step: 'name'; instance: string } | { step: 'busy'; instance: string };

function nameProblem(name: string): string | null {
  try {
    validateKeyName(name);
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

function steps(current: 1 | 2 | 3): string {
  return ['1 instance', '2 name', '3 secret'].map((s, i) => (i + 1 === current ? `[${s}]` : s)).join(' › ');
}

export function GenerateKey({ instances, keys, preselect, width, onGenerate, onCancel }: GenerateKeyProps) {
  const tone = useTone();
  const ready = instances.filter((i) => i.state === 'ready');
  const [state, setState] = useState<Step>({ step: 'choose' });
  const [cursor, setCursor] = useState<string | null>(() => ready.find((i) => i.id === preselect)?.id ?? ready[0]?.id ?? null);
  const [name, setName] = useState('');
  const [error, setError] = useState<string | null>(null);

  // The cursor moves over ready instances only; it follows live changes.
  const readyIds = ready.map((i) => i.id);
  const chosen = cursor !== null && readyIds.includes(cursor) ? cursor : (readyIds[0] ?? null);

  useInput((input, key) => {
    if (state.step === 'busy') return;
    if (state.step === 'choose') {
      if (key.escape || input === 'q') return onCancel();
      const at = chosen === null ? -1 : readyIds.indexOf(chosen);
      if (key.upArrow || input === 'k') setCursor(readyIds[Math.max(0, at - 1)] ?? null);
      else if (key.downArrow || input === 'j') setCursor(readyIds[Math.min(readyIds.length - 1, at + 1)] ?? null);
      else if (key.return && chosen !== null) {
        setError(null);
        setState({ step: 'name', instance: chosen });
      }
      return;
    }
    // Name step: every printable key is text, so q and j type letters here.
    if (key.escape) {
      setError(null);
      setState({ step: 'choose' });
      return;
    }
    if (key.return) {
      let valid: string;
      try {
        valid = validateKeyName(name);
      } catch (err) {
        setError((err as Error).message);
        return;
      }
      const instance = state.instance;
      setState({ step: 'busy', instance });
      setError(null);
      onGenerate(instance, valid).catch((err: unknown) => {
        setError(err instanceof Error ? err.message : String(err));
        setState({ step: 'name', instance });
      });
      return;
    }
    if (key.backspace || key.delete) return setName((n) => [...n].slice(0, -1).join(''));
    if (key.ctrl && input === 'u') return setName('');
    if (key.ctrl || key.meta || key.tab || key.upArrow || key.downArrow || key.leftArrow || key.rightArrow) return;
    if (input.length > 0) {
      setError(null);
      setName((n) => n + input);
    }
  });

  if (state.step === 'choose') {
    return (
      <Box flexDirection="column">
        <Text bold>New key · {steps(1)}</Text>
        <Text color={tone('muted')}>Choose a ready instance (↑ ↓, Enter), Esc cancels.</Text>
        <Text> </Text>
        {instances.length === 0 ? <Text color={tone('warn')}>No instances. Add one with `ob-proxy instances add`.</Text> : null}
        {instances.length > 0 && ready.length === 0
          ? <Text color={tone('warn')}>No instance is ready: make one ready with `ob-proxy instances ready &lt;id&gt;`.</Text>
          : null}
        {instances.map((i) => {
          const why = whyNotShort(i.state);
          const isChosen = i.id === chosen;
          return (
            <Text key={i.id} wrap="truncate" inverse={isChosen} color={why === null ? undefined : tone('muted')}>
              {isChosen ? '› ' : '  '}
              {fit(i.id, 14)} {fit(i.model, 12)} <Text color={tone(stateTone(i.state))}>{fit(i.state, 10)}</Text>
              {why === null ? '' : ` cannot be chosen: ${why}`}
            </Text>
          );
        })}
      </Box>
    );
  }

  const inst = instances.find((i) => i.id === state.instance);
  const length = [...name].length;
  const duplicate = keys.some((k) => k.instance === state.instance && k.status === 'active' && k.name === name.trim());
  const gone = inst === undefined ? `${state.instance} no longer exists.` : whyNotReady(inst);
  // Checked as the daemon will check it, while typing; an empty name is reported on Enter.
  const problem = error ?? (name === '' ? null : nameProblem(name));
  const label = 'Name: ';
  const counter = `${length}/${KEY_NAME_MAX}`;
  return (
    <Box flexDirection="column">
      <Text bold wrap="truncate">New key for {state.instance}{inst === undefined ? '' : ` (${inst.model})`} · {steps(2)}</Text>
      <Text color={tone('muted')} wrap="truncate">Type a name (who or what uses the key), Enter generates, Esc goes back.</Text>
      <Text> </Text>
      <Text wrap="truncate">
        {label}<Text bold>{name}</Text>{state.step === 'busy' ? '' : <Text inverse> </Text>}
        {/* Cells, not characters: a CJK name would push the counter off the line. */}
        {' '.repeat(Math.max(1, width - label.length - cells(name) - 1 - counter.length))}
        <Text color={length > KEY_NAME_MAX ? tone('bad') : tone('muted')}>{counter}</Text>
      </Text>
      <Text> </Text>
      {state.step === 'busy' ? <Text>Generating…</Text> : null}
      {problem === null ? null : <Text color={tone('bad')} wrap="wrap">{problem}</Text>}
      {gone === null ? null : <Text color={tone('warn')} wrap="wrap">{gone}</Text>}
      {duplicate ? <Text color={tone('warn')} wrap="wrap">{state.instance} already has an active key named "{name.trim()}"; a second one is allowed but harder to tell apart.</Text> : null}
    </Box>
  );
}
