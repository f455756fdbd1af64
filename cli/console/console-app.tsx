/**
 * The console: three panes (Instances, Keys, Revocations) and, over them, one modal at a time
 * (help, new key, revoke confirmation, secret box). Pane keys are handled here; each modal
 * handles its own keys, so text typed into a name never moves a pane.
 *
 * Secrets: only the secret box holds one, in `modal`; confirming it drops the modal, and with it
 * the only reference the console had. Default keys that become ready while the console is open
 * are revealed (once) when no modal is open, so a key press meant for something else never
 * lands on a secret box that just appeared.
 *
 *   ob-proxy console · http://127.0.0.1:8080 · ● live                    ? help
 *   [1 Instances (2)] 2 Keys: gpu-1 (1)  3 Revocations (0)
 *     ID     MODEL        STATE    ENDPOINT         PACK END (UTC)     KEYS
 *   › gpu-1  gemma4:26b   ready    http://10.0.0.5… none                  1
 *   …
 *   04:01:22 gpu-2 is now stopped: its keys were revoked.
 *   ↑↓ move  Enter keys  n new key  Tab pane  ? help  q quit
 */
import { Box, useApp, useInput, useStdout, useWindowSize } from 'ink';
import { useCallback, useEffect, useRef, useState } from 'react';
import type { AuditEvent } from '../../src/domain/key.js';
import type { KeyLimits } from '../../src/domain/key.js';
import type { InstanceView, KeyView, RevocationView } from '../../src/wire/views.js';
import { parseGrace } from '../key-card.js';
import { formatLimits, limitsFrom } from '../limit-options.js';
import { parsePackEnds } from '../pack-ends.js';
import { DOOM, rotateQuestion } from '../questions.js';
import { osc52 } from './clipboard.js';
import type { ConsoleClient } from './console-client.js';
import { ConfirmAction } from './components/confirm-action.js';
import { ConfirmRevoke } from './components/confirm-revoke.js';
import { KeyCard } from './components/key-card.js';
import { TextPrompt } from './components/text-prompt.js';
import { Disconnected } from './components/disconnected.js';
import { Header, PANES, type Pane, Tabs } from './components/header.js';
import { HelpOverlay } from './components/help-overlay.js';
import { SecretBox, type ShownSecret } from './components/secret-box.js';
import { type Notice, StatusLine } from './components/status-line.js';
import { daemonsSummary, reasonText, shortUtc } from './format.js';
import { GenerateKey } from './screens/generate-key.js';
import { InstancesScreen } from './screens/instances-screen.js';
import { KeysScreen } from './screens/keys-screen.js';
import { RevocationsScreen } from './screens/revocations-screen.js';
import { ColourContext, type Tone } from './theme.js';
import { useDaemon } from './use-daemon.js';
import { useLiveStats } from './use-live-stats.js';
import { useNow } from './use-now.js';
import { type PageView, usePage } from './use-page.js';

export interface ConsoleAppProps {
  client: ConsoleClient;
  /** False with NO_COLOR or off a terminal. */
  colour?: boolean;
  clock?: () => number;
  retryMs?: number;
  pollMs?: number;
  tickMs?: number;
  /** How often the live figures are read (the daemon samples them once a second). */
  statsMs?: number;
}

type Modal =
  | { kind: 'help' }
  | { kind: 'generate'; preselect: string | null }
  | { kind: 'revoke'; target: KeyView; busy: boolean }
  | { kind: 'secret'; shown: ShownSecret; after?: string }
  | { kind: 'halt'; action: 'stop' | 'fail'; target: InstanceView; busy: boolean }
  | { kind: 'extend'; target: InstanceView }
  | { kind: 'limits'; target: KeyView }
  | { kind: 'show'; view: KeyView }
  | { kind: 'grace'; target: KeyView }
  | { kind: 'rotate'; target: KeyView; grace: number; graceText: string | undefined; busy: boolean };

interface RevealCandidate {
  keyId: string;
  instance: string;
}

const HINTS: Record<Pane | Modal['kind'] | 'down', string> = {
  instances: '↑↓ move  Enter keys  s stop  f fail  e extend  n new key  ? help  q quit',
  keys: '↑↓ ←→ move  Enter show  l limits  o rotate  x revoke  r reveal  ? help  q back',
  revocations: '↑↓ move  n new key  Tab pane  ? help  q back',
  help: 'Esc close',
  generate: '↑↓ choose an instance  Enter next  Esc back  Ctrl+U clear the name',
  revoke: 'y revoke  n / Esc keep it',
  secret: 'c copy  Enter saved: forget it  (Ctrl+C quits; the secret is lost)',
  halt: 'y yes  n / Esc keep it',
  extend: 'Enter apply  Esc cancel  Ctrl+U clear',
  limits: 'Enter apply  Esc cancel  Ctrl+U clear',
  show: 'Enter / Esc close',
  grace: 'Enter next  Esc cancel  Ctrl+U clear',
  rotate: 'y rotate  n / Esc keep it',
  down: 'q quit  ? help',
};

/** States an instance leaves no more: stop and fail are refused there. */
const HALTED = new Set(['stopped', 'failed', 'terminated']);

/** `rpm=60 tpm=none`: the CLI's --rpm, --tpm and --concurrency, read by the same rule. */
function parseLimits(text: string): Partial<KeyLimits> {
  const given: Partial<Record<keyof KeyLimits, string>> = {};
  for (const word of text.trim().split(/\s+/).filter((w) => w !== '')) {
    const m = /^(rpm|tpm|concurrency)=(.*)$/.exec(word);
    if (m === null) throw new Error(`"${word}" is not a limit: give rpm=N, tpm=N or concurrency=N (N a whole number, or none).`);
    given[m[1] as keyof KeyLimits] = m[2]!;
  }
  const limits = limitsFrom(given);
  if (Object.keys(limits).length === 0) throw new Error('Give at least one limit: rpm=N, tpm=N or concurrency=N (none removes it).');
  return limits;
}

/** The key's limits as the prompt starts with them: every one, `none` where unset. */
function limitsInput(l: KeyLimits | undefined): string {
  return `rpm=${l?.rpm ?? 'none'} tpm=${l?.tpm ?? 'none'} concurrency=${l?.concurrency ?? 'none'}`;
}

function limitsLine(l: KeyLimits | undefined): string {
  const text = formatLimits(l);
  return text === '-' ? 'none' : text;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

function clampIndex(i: number, length: number): number {
  return Math.max(0, Math.min(i, length - 1));
}

/** The selection that stands for the last row of a page not read yet (↑ from a page's first row). */
const LAST_ROW = '\u0000last';

/** `keys 41-80 of many`: where the page is, once the list has more than one; the daemon gives no count. */
function pagePosition(what: string, page: PageView<unknown>): string | null {
  if (page.offset === 0 && !page.more) return null;
  const first = page.offset + 1;
  const last = page.offset + page.rows.length;
  const range = page.rows.length === 0 ? 'none' : `${first}-${last}`;
  return `${what} ${range} of ${page.more ? 'many · PgDn next page' : last}${page.offset > 0 ? ' · PgUp previous' : ''}`;
}

/** An event that changes a row of the shown keys page, or adds one at its end. */
function touchesKeysPage(e: AuditEvent, instance: string | undefined, page: PageView<KeyView>): boolean {
  if (instance === undefined || e.instance !== instance) return false;
  if (e.keyId !== undefined && page.rows.some((k) => k.id === e.keyId)) return true;
  // A new key is the last of its instance's list: only the last page shows it.
  if (e.type === 'key.created') return !page.more;
  // Halting an instance revokes every key of it, each with an event; one read covers them.
  return e.type === 'instance.state' && e.reason !== undefined;
}

export function ConsoleApp({ client, colour = true, clock = Date.now, retryMs = 1_000, pollMs = 5_000, tickMs = 15_000, statsMs = 1_000 }: ConsoleAppProps) {
  const { exit } = useApp();
  const { stdout } = useStdout();
  const { columns, rows } = useWindowSize();
  const now = useNow(clock, tickMs);

  const [pane, setPane] = useState<Pane>('instances');
  const [instanceId, setInstanceId] = useState<string | null>(null);
  const [keyId, setKeyId] = useState<string | null>(null);
  const [revIndex, setRevIndex] = useState(0);
  const [modal, setModal] = useState<Modal | null>(null);
  const [notice, setNotice] = useState<Notice | null>(null);
  const [reveals, setReveals] = useState<RevealCandidate[]>([]);
  const revealing = useRef(false);
  const toldUnrevealed = useRef(false);
  // Instances with a default key never shown: found on the first read, then kept by events.
  const [unrevealed, setUnrevealed] = useState<ReadonlySet<string>>(new Set());
  // What an event is compared with: the pages shown when it arrives.
  const shown = useRef<{ instance: string | undefined; keys: PageView<KeyView> | null; revocations: PageView<RevocationView> | null }>({
    instance: undefined, keys: null, revocations: null,
  });

  const say = useCallback((text: string, tone: Tone = 'accent') => {
    setNotice({ at: new Date(clock()).toISOString(), text, tone });
  }, [clock]);

  const onEvent = useCallback((e: AuditEvent) => {
    const { instance: shownInstance, keys: keysPage, revocations: revPage } = shown.current;
    if (keysPage !== null && touchesKeysPage(e, shownInstance, keysPage)) keysPage.reload();
    // A revocation is the last of the trail: only the last page shows it.
    if (revPage !== null && !revPage.more && (e.type === 'key.revoked' || (e.type === 'instance.state' && e.reason !== undefined))) revPage.reload();
    if (e.type === 'key.revealed' || (e.type === 'instance.state' && e.reason !== undefined)) {
      setUnrevealed((u) => {
        if (!u.has(e.instance)) return u;
        const next = new Set(u);
        next.delete(e.instance);
        return next;
      });
    }
    switch (e.type) {
      case 'key.created':
        if (e.keyName === 'default' && e.keyId !== undefined) {
          setReveals((q) => [...q, { keyId: e.keyId as string, instance: e.instance }]);
          setUnrevealed((u) => new Set([...u, e.instance]));
          say(`${e.instance} is ready and has a new default key.`, 'good');
        } else {
          say(`Key "${e.keyName ?? ''}" created for ${e.instance}.`);
        }
        return;
      case 'key.rotated':
        return say(`Key "${e.keyName ?? ''}" of ${e.instance} rotated.`);
      case 'key.limited':
        return say(`Limits of key "${e.keyName ?? ''}" of ${e.instance} changed.`);
      case 'key.revoked':
        return say(`Key "${e.keyName ?? ''}" of ${e.instance} revoked: ${reasonText(e.reason ?? null)}.`, 'warn');
      case 'instance.state':
        return say(`${e.instance} is now ${e.state ?? '?'}${e.reason === undefined ? '' : ': its keys were revoked'}.`, e.state === 'ready' ? 'good' : 'warn');
      case 'instance.added':
        return say(`Instance ${e.instance} added (pending).`);
      case 'instance.removed':
        return say(`Instance ${e.instance} removed.`, 'warn');
      case 'instance.extended':
        return say(`Pack of ${e.instance} extended${e.packEndsAt == null ? '' : ` to ${shortUtc(e.packEndsAt)} UTC`}.`);
      case 'instance.aliased':
        return say(e.aliases === undefined || e.aliases.length === 0 ? `${e.instance} has no aliases now.` : `Aliases of ${e.instance}: ${e.aliases.join(', ')}.`);
      default:
        return;
    }
  }, [say]);

  const { data, refresh } = useDaemon(client, { retryMs, pollMs, onEvent });
  const live = data.connection.state === 'live';
  const liveStats = useLiveStats(client, live, statsMs);
  // Empty while the daemon is still binding its public port.
  const baseUrl = data.status === null || data.status.baseUrl === '' ? null : data.status.baseUrl;

  // Selections are kept by id, so live changes to the lists never move them to another row.
  const instances = data.instances;
  const instanceIndex = clampIndex(Math.max(0, instances.findIndex((i) => i.id === instanceId)), instances.length);
  const instance = instances[instanceIndex];

  const bodyHeight = Math.max(4, rows - 5);
  // The rows each list pane has room for: the daemon is asked for as many, a page at a time.
  const keysFit = Math.max(1, bodyHeight - 8);
  const revocationsFit = Math.max(1, bodyHeight - 5);
  const instanceKey = instance?.id;
  const keysPage = usePage<KeyView>(
    useCallback(async (after, limit) => {
      const p = await client.keyPage({ instance: instanceKey, limit, after });
      return { rows: p.keys, next: p.next };
    }, [client, instanceKey]),
    `${instanceKey ?? ''}\u0000${keysFit}`, keysFit, live && (pane === 'keys' || modal?.kind === 'generate') && instanceKey !== undefined,
  );
  const revPage = usePage<RevocationView>(
    useCallback(async (after, limit) => {
      const p = await client.revocationPage({ limit, after });
      return { rows: p.revocations, next: p.next };
    }, [client]),
    String(revocationsFit), revocationsFit, live && pane === 'revocations',
  );
  shown.current = { instance: instanceKey, keys: pane === 'keys' ? keysPage : null, revocations: pane === 'revocations' ? revPage : null };
  const keys = keysPage.rows;
  const keyIndex = keyId === LAST_ROW ? Math.max(0, keys.length - 1) : clampIndex(Math.max(0, keys.findIndex((k) => k.id === keyId)), keys.length);
  const currentKey = keys[keyIndex];
  const revocations = revPage.rows;
  const revSelected = revIndex < 0 ? Math.max(0, revocations.length - 1) : clampIndex(revIndex, revocations.length);

  // What changes without an event (usage counters) is read again for the shown page only.
  useEffect(() => {
    if (!live || pane !== 'keys') return;
    const timer = setInterval(() => keysPage.reload(), pollMs);
    return () => clearInterval(timer);
  }, [live, pane, pollMs, keysPage.reload]);

  const reveal = useCallback((target: RevealCandidate, title: string) => {
    revealing.current = true;
    client.revealKey(target.keyId).then((k) => {
      setModal({ kind: 'secret', shown: { title, secret: k.secret, keyId: k.id, keyName: k.name, instance: k.instance } });
    }, (err: unknown) => {
      say(`The default key of ${target.instance} could not be shown: ${errorText(err)}`, 'warn');
    }).finally(() => {
      revealing.current = false;
    });
  }, [client, say]);

  // Default keys that became ready while open: shown once, when nothing else is on screen.
  useEffect(() => {
    if (modal !== null || !live || revealing.current || reveals.length === 0) return;
    const [next, ...rest] = reveals as [RevealCandidate, ...RevealCandidate[]];
    setReveals(rest);
    revealing.current = true;
    client.getKey(next.keyId).then((k) => {
      revealing.current = false;
      // Not revealable: `instances ready` (without --no-wait) or another console showed it.
      if (k.revealable && k.status === 'active') reveal(next, `${next.instance} is ready: its default key`);
    }, () => {
      revealing.current = false;
    });
  }, [modal, live, reveals, client, reveal]);

  // Once, on the first read: default keys nobody has seen yet. An instance's default key is the
  // first it gets (made when it becomes ready), so one row of its active keys tells.
  useEffect(() => {
    if (!data.loaded || toldUnrevealed.current) return;
    toldUnrevealed.current = true;
    const candidates = data.instances.filter((i) => i.state === 'ready' && i.activeKeys > 0);
    void Promise.all(candidates.map((i) => client.keyPage({ instance: i.id, status: 'active', limit: 1 }).then(
      (p) => (p.keys[0]?.revealable === true ? i.id : null), () => null,
    ))).then((found) => {
      const waiting = found.filter((id): id is string => id !== null);
      if (waiting.length === 0) return;
      setUnrevealed((u) => new Set([...u, ...waiting]));
      say(`${waiting.join(', ')}: default key never shown; select it in Keys and press r.`, 'warn');
    });
  }, [data.loaded, data.instances, client, say]);

  const generate = useCallback(async (target: string, name: string) => {
    const k = await client.createKey(target, name);
    setModal({ kind: 'secret', shown: { title: `New key "${k.name}" for ${k.instance}`, secret: k.secret, keyId: k.id, keyName: k.name, instance: k.instance } });
  }, [client]);

  const secretSaved = useCallback((shown: ShownSecret, after?: string) => {
    setModal(null);
    setPane('keys');
    setInstanceId(shown.instance);
    setKeyId(shown.keyId);
    say(after ?? `"${shown.keyName}" is active; the console has forgotten its secret.`, 'good');
    void refresh();
  }, [refresh, say]);

  const revoke = useCallback((target: KeyView) => {
    setModal({ kind: 'revoke', target, busy: true });
    client.revokeKey(target.id).then(() => {
      say(`Revoked "${target.name}" of ${target.instance}: it answers 401 from now on.`, 'warn');
    }, (err: unknown) => {
      say(`Could not revoke "${target.name}": ${errorText(err)}`, 'bad');
    }).finally(() => {
      setModal(null);
      void refresh();
    });
  }, [client, refresh, say]);

  const halt = useCallback((action: 'stop' | 'fail', target: InstanceView) => {
    setModal({ kind: 'halt', action, target, busy: true });
    client.move(target.id, action).then((i) => {
      say(`Instance ${i.id} is now ${i.state}. All its keys are revoked.`, 'warn');
    }, (err: unknown) => {
      say(`Could not ${action} ${target.id}: ${errorText(err)}`, 'bad');
    }).finally(() => {
      setModal(null);
      void refresh();
    });
  }, [client, refresh, say]);

  const extend = useCallback(async (target: InstanceView, text: string) => {
    const at = parsePackEnds(text, clock());
    const i = await client.extend(target.id, at);
    setModal(null);
    say(`Pack of ${i.id} now ends ${i.packEndsAt ?? '-'}; its ${i.activeKeys} key(s) keep working.`, 'good');
    void refresh();
  }, [client, clock, refresh, say]);

  const setLimits = useCallback(async (target: KeyView, text: string) => {
    const k = await client.setKeyLimits(target.id, parseLimits(text));
    setModal(null);
    say(`Limits of "${k.name}": ${limitsLine(k.limits)}.`, 'good');
    void refresh();
  }, [client, refresh, say]);

  const showKey = useCallback((target: KeyView) => {
    client.getKey(target.id).then((view) => setModal({ kind: 'show', view }), (err: unknown) => {
      say(`Could not read "${target.name}": ${errorText(err)}`, 'bad');
    });
  }, [client, say]);

  const rotate = useCallback((target: KeyView, grace: number, graceText: string | undefined) => {
    setModal({ kind: 'rotate', target, grace, graceText, busy: true });
    client.rotateKey(target.id, grace === 0 ? undefined : grace).then((k) => {
      const old = k.replaces;
      const after = old.status === 'revoked'
        ? `"${k.name}" rotated: its old key answers 401 from now on.`
        : `"${k.name}" rotated: its old key serves until ${old.revokeAt === undefined ? '?' : shortUtc(old.revokeAt)} UTC.`;
      setModal({ kind: 'secret', shown: { title: `Key "${k.name}" of ${k.instance}, rotated`, secret: k.secret, keyId: k.id, keyName: k.name, instance: k.instance }, after });
    }, (err: unknown) => {
      say(`Could not rotate "${target.name}": ${errorText(err)}`, 'bad');
      setModal(null);
    }).finally(() => {
      void refresh();
    });
  }, [client, refresh, say]);

  const page = Math.max(1, bodyHeight - 5);

  const move = (to: 'up' | 'down' | 'pageUp' | 'pageDown' | 'first' | 'last'): void => {
    const step = (index: number, length: number): number => {
      switch (to) {
        case 'first': return 0;
        case 'last': return Math.max(0, length - 1);
        case 'up': return clampIndex(index - 1, length);
        case 'down': return clampIndex(index + 1, length);
        case 'pageUp': return clampIndex(index - page, length);
        case 'pageDown': return clampIndex(index + page, length);
      }
    };
    if (pane === 'instances') return setInstanceId(instances[step(instanceIndex, instances.length)]?.id ?? null);
    // Keys and revocations move by the daemon's pages: PgDn, PgUp and ↓ ↑ past a page's edge
    // ask for the next or previous one; Home the first. End stays on the page shown (the last
    // page of a long list is found only by walking it).
    const list: PageView<unknown> = pane === 'keys' ? keysPage : revPage;
    const index = pane === 'keys' ? keyIndex : revSelected;
    const length = pane === 'keys' ? keys.length : revocations.length;
    const select = (at: number | 'last'): void => {
      if (pane === 'keys') setKeyId(at === 'last' ? LAST_ROW : keys[clampIndex(at, keys.length)]?.id ?? null);
      else setRevIndex(at === 'last' ? -1 : at);
    };
    if ((to === 'pageDown' || (to === 'down' && index === length - 1)) && list.more) {
      list.nextPage();
      return select(0);
    }
    if ((to === 'pageUp' || (to === 'up' && index === 0)) && list.offset > 0) {
      list.previousPage();
      return select(to === 'up' ? 'last' : 0);
    }
    if (to === 'first' && list.offset > 0) {
      list.firstPage();
      return select(0);
    }
    select(step(index, length));
  };

  useInput((input, key) => {
    if (input === '?') return setModal({ kind: 'help' });
    if (key.escape || input === 'q') {
      if (pane === 'instances' || !live) return exit();
      return setPane('instances');
    }
    if (key.tab) {
      const at = PANES.indexOf(pane);
      return setPane(PANES[(at + (key.shift ? PANES.length - 1 : 1)) % PANES.length] as Pane);
    }
    if (input === '1' || input === '2' || input === '3') return setPane(PANES[Number(input) - 1] as Pane);
    if (!live) return say('The daemon is not reachable; the console reconnects on its own.', 'bad');
    if (key.upArrow || input === 'k') return move('up');
    if (key.downArrow || input === 'j') return move('down');
    if (key.pageUp) return move('pageUp');
    if (key.pageDown) return move('pageDown');
    if (key.home) return move('first');
    if (key.end) return move('last');
    if (input === 'n') return setModal({ kind: 'generate', preselect: instance?.id ?? null });
    if (pane === 'instances' && key.return && instance !== undefined) {
      setKeyId(null);
      return setPane('keys');
    }
    if (pane === 'instances' && (input === 's' || input === 'f' || input === 'e')) {
      if (instance === undefined) return say('No instance selected.', 'warn');
      if (input === 'e') return setModal({ kind: 'extend', target: instance });
      const action = input === 's' ? 'stop' : 'fail';
      if (HALTED.has(instance.state)) return say(`${instance.id} is already ${instance.state}.`, 'warn');
      return setModal({ kind: 'halt', action, target: instance, busy: false });
    }
    if (pane === 'keys') {
      if (key.leftArrow || key.rightArrow) {
        const next = instances[clampIndex(instanceIndex + (key.leftArrow ? -1 : 1), instances.length)];
        setKeyId(null);
        return setInstanceId(next?.id ?? null);
      }
      if (input === 'x' || key.delete) {
        if (currentKey === undefined) return say('No key selected.', 'warn');
        if (currentKey.status !== 'active') return say(`"${currentKey.name}" is already revoked.`, 'warn');
        return setModal({ kind: 'revoke', target: currentKey, busy: false });
      }
      if (key.return || input === 'l' || input === 'o') {
        if (currentKey === undefined) return say('No key selected.', 'warn');
        if (key.return) return showKey(currentKey);
        if (currentKey.status !== 'active') return say(`"${currentKey.name}" is revoked.`, 'warn');
        if (input === 'l') return setModal({ kind: 'limits', target: currentKey });
        return setModal({ kind: 'grace', target: currentKey });
      }
      if (input === 'r') {
        if (currentKey?.revealable === true) return reveal({ keyId: currentKey.id, instance: currentKey.instance }, `Default key of ${currentKey.instance}`);
        return say('Shown once: only an unshown default key can be revealed (n: new key).', 'warn');
      }
    }
  }, { isActive: modal === null });

  const hints = modal !== null ? HINTS[modal.kind] : !live ? HINTS.down : HINTS[pane];
  const labels: Record<Pane, string> = {
    instances: `Instances (${instances.length})`,
    keys: instance === undefined ? 'Keys' : `Keys: ${instance.id} (${instance.activeKeys})`,
    // No count: the trail may be long, and the daemon counts only by reading all of it.
    revocations: 'Revocations',
  };

  let body;
  if (modal?.kind === 'secret') {
    const { shown, after } = modal;
    body = <SecretBox shown={shown} baseUrl={baseUrl} width={columns}
      onCopy={(secret) => stdout.write(osc52(secret))} onSaved={() => secretSaved(shown, after)} />;
  } else if (modal?.kind === 'help') {
    body = <HelpOverlay height={bodyHeight} onClose={() => setModal(null)} />;
  } else if (!live) {
    body = <Disconnected connection={data.connection} socketPath={client.socketPath} />;
  } else if (modal?.kind === 'generate') {
    body = <GenerateKey instances={instances} keys={keys} preselect={modal.preselect} width={columns}
      onGenerate={generate} onCancel={() => setModal(null)} />;
  } else if (modal?.kind === 'revoke') {
    const target = modal.target;
    body = <ConfirmRevoke target={target} busy={modal.busy} onYes={() => revoke(target)} onNo={() => setModal(null)} />;
  } else if (modal?.kind === 'halt') {
    const { action, target } = modal;
    body = <ConfirmAction question={DOOM[action](target)} yes={action} busy={modal.busy} busyText={action === 'stop' ? 'Stopping…' : 'Marking it failed…'}
      detail={`Every request with ${target.activeKeys === 1 ? 'it' : 'them'} is refused (401) at once. This cannot be undone.`}
      onYes={() => halt(action, target)} onNo={() => setModal(null)} />;
  } else if (modal?.kind === 'extend') {
    const target = modal.target;
    body = <TextPrompt title={`Extend the pack of ${target.id} · now ends ${target.packEndsAt === null ? '-' : `${shortUtc(target.packEndsAt)} UTC`}`}
      help="A time (2026-12-01T18:00:00Z) or a duration from now (+8h, +30d). Same id, its keys keep working. Enter applies, Esc cancels."
      label="Pack ends: " onSubmit={(text) => extend(target, text)} onCancel={() => setModal(null)} />;
  } else if (modal?.kind === 'limits') {
    const target = modal.target;
    body = <TextPrompt title={`Limits of key "${target.name}" (${target.hint}) of ${target.instance} · now ${limitsLine(target.limits)}`}
      help="rpm=N tpm=N concurrency=N, each 1 or more or none (removes it); a limit left out is kept. On every daemon at once. Enter applies, Esc cancels."
      label="Limits: " initial={limitsInput(target.limits)} onSubmit={(text) => setLimits(target, text)} onCancel={() => setModal(null)} />;
  } else if (modal?.kind === 'show') {
    body = <KeyCard view={modal.view} onClose={() => setModal(null)} />;
  } else if (modal?.kind === 'grace') {
    const target = modal.target;
    body = <TextPrompt title={`Rotate key "${target.name}" (${target.hint}) of ${target.instance}: new secret, same name and limits`}
      help="How long the old secret keeps serving: empty or 0 for none, else 90s, 30m, 1h, 1d12h (at most 30d). Enter goes on to the question, Esc cancels."
      label="Grace: " onSubmit={async (text) => {
        const graceText = text.trim() === '' || text.trim() === '0' ? undefined : text.trim();
        const grace = graceText === undefined ? 0 : parseGrace(graceText);
        setModal({ kind: 'rotate', target, grace, graceText, busy: false });
      }} onCancel={() => setModal(null)} />;
  } else if (modal?.kind === 'rotate') {
    const { target, grace, graceText } = modal;
    body = <ConfirmAction question={rotateQuestion(target, graceText)} yes="rotate" busy={modal.busy} busyText="Rotating…"
      detail="The new secret is shown once; the old key is revoked (reason rotated) when its grace ends."
      onYes={() => rotate(target, grace, graceText)} onNo={() => setModal(null)} />;
  } else if (pane === 'instances') {
    body = <InstancesScreen instances={instances} selected={instanceIndex} width={columns} height={bodyHeight} now={now} unrevealed={unrevealed} live={liveStats} />;
  } else if (pane === 'keys') {
    body = <KeysScreen instance={instance} keys={keys} selected={keyIndex} width={columns} height={bodyHeight} now={now} position={pagePosition('keys', keysPage)} />;
  } else {
    body = <RevocationsScreen revocations={revocations} selected={revSelected} width={columns} height={bodyHeight} position={pagePosition('revocations', revPage)} />;
  }

  return (
    <ColourContext.Provider value={colour}>
      <Box flexDirection="column" width={columns} height={Math.max(6, rows - 1)}>
        <Header baseUrl={baseUrl} connection={data.connection} width={columns} daemons={daemonsSummary(data.status?.daemons)} />
        <Tabs pane={pane} labels={labels} />
        <Box flexDirection="column" height={bodyHeight} overflow="hidden">{body}</Box>
        <StatusLine notice={notice} hints={hints} />
      </Box>
    </ColourContext.Provider>
  );
}
