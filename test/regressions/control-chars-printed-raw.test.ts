/**
 * Regression (operators' mistakes): names, ids, endpoints and hints already in a store
 * (a hand edit, an older version) were printed raw by `keys list` and the console: an ESC
 * sequence in a key name cleared the screen, an OSC one set the window title, a bidi override
 * made a name read backwards. The store below is hostile in every field a person reads; every
 * human output of the CLI, every console frame and the daemon's log must show those characters as
 * escapes, and --json must keep the exact values.
 */
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { createElement } from 'react';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleApp } from '../../cli/console/console-app.js';
import { KeystrokeInput } from '../../cli/console/keystroke-input.js';
import { DaemonClient } from '../../cli/daemon-client.js';
import type { KeyView } from '../../src/wire/views.js';
import { renderInk } from '../helpers/ink.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';
import { tmpHome } from '../helpers/processes.js';
import { type Harness, startHarness } from '../reliability/harness.js';

const TITLE = '\u001b]0;pwned\u0007';
const CLEAR = '\u001b[2J\u001b[H';
// Instance ids are checked when the store is loaded (store-records-not-validated): a hostile id
// stops the daemon with an escaped message, so the ids here are valid and the rest is hostile.
const INSTANCE = 'gpu-1';
const DEAD = 'old-2';
const NAMES = [
  `${CLEAR}ci-bot`,
  `csi\u009b31m`,
  `invoice\u202egpj.exe`,
  `zero\u200bwidth\u2060`,
  `line\u2028sep`,
  `del\u007fete`,
  `multi\nline\r\tname`,
  `isolate\u2066x\u2069`,
  `bom\ufeff`,
];
const REVOKED_NAME = `gone${TITLE}`;

const AT = '2026-11-23T10:00:00.000Z';
const usage = { requests: 0, promptTokens: 0, completionTokens: 0 };

function key(id: string, name: string, instance: string, deployment: string, revoked = false) {
  return {
    id,
    name,
    instance,
    deployment,
    hash: createHash('sha256').update(id).digest('hex'),
    hint: `ob_sk_…${CLEAR}AAAA`,
    isDefault: false,
    status: revoked ? 'revoked' : 'active',
    createdAt: AT,
    lastUsedAt: null,
    revokedAt: revoked ? AT : null,
    revokeReason: revoked ? 'manual' : null,
    usage,
  };
}

const KEY_IDS = NAMES.map((_, i) => `key${String(i).padStart(9, '0')}`);

/** A version 2 store, as src/store/store.ts StoreData, hostile in every field a person reads. */
const STORE = {
  version: 2,
  instances: [
    {
      id: INSTANCE,
      deployment: 'dep-1',
      model: 'gemma4:26b',
      endpoint: `http://127.0.0.1:9/${CLEAR}\u202e`,
      state: 'ready',
      packEndsAt: null,
      createdAt: AT,
      updatedAt: AT,
      // Missing, so the daemon logs the instance's id at start.
      upstreamTokenFile: '/nonexistent/ob-proxy-token',
    },
    {
      id: DEAD,
      deployment: 'dep-2',
      model: 'gemma4:26b',
      endpoint: null,
      state: 'terminated',
      packEndsAt: null,
      createdAt: AT,
      updatedAt: AT,
    },
  ],
  keys: [
    ...NAMES.map((name, i) => key(KEY_IDS[i]!, name, INSTANCE, 'dep-1')),
    key('keyrevoked01', REVOKED_NAME, DEAD, 'dep-2', true),
  ],
  events: [
    {
      seq: 1,
      at: AT,
      type: 'key.revoked',
      instance: DEAD,
      keyId: 'keyrevoked01',
      keyName: REVOKED_NAME,
      reason: 'manual',
    },
  ],
};

// Everything named in the issue: C0, DEL, C1, bidi, zero-width, BOM, separators.
// eslint-disable-next-line no-control-regex
const RAW = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u00ad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/u;
// What Ink itself writes: colours and bold/inverse (SGR). Any other ESC came from the data.
// eslint-disable-next-line no-control-regex
const SGR = /\u001b\[[0-9;]*m/g;

let d: Harness;
let cli: InprocCli;
beforeAll(async () => {
  const home = await tmpHome();
  await writeFile(join(home, 'db.json'), JSON.stringify(STORE), { mode: 0o600 });
  d = await startHarness({}, { home });
  cli = inprocCli(d.daemon.management);
});
afterAll(async () => {
  await d?.stop();
});

async function human(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const r = await cli.run(...args);
  for (const [stream, text] of [
    ['stdout', r.stdout],
    ['stderr', r.stderr],
  ] as const) {
    expect(
      RAW.test(text),
      `ob-proxy ${args.join(' ')} wrote a raw control character on ${stream}: ${JSON.stringify(text)}`,
    ).toBe(false);
  }
  return r;
}

describe('the CLI prints names from the store escaped', () => {
  it('keys list: one line per key, every hostile character visible as an escape', async () => {
    const r = await human(['keys', 'list']);
    expect(r.code).toBe(0);
    expect(r.stdout.trimEnd().split('\n')).toHaveLength(1 + NAMES.length + 1);
    expect(r.stdout).toContain('\\x1b[2J\\x1b[Hci-bot');
    expect(r.stdout).toContain('csi\\x9b31m');
    expect(r.stdout).toContain('invoice\\u202egpj.exe');
    expect(r.stdout).toContain('multi\\nline\\r\\tname');
    expect(r.stdout).toContain('ob_sk_…\\x1b[2J\\x1b[HAAAA');
  });

  it('instances list and show: endpoints escaped', async () => {
    const list = await human(['instances', 'list']);
    expect(list.code).toBe(0);
    expect(list.stdout).toContain('http://127.0.0.1:9/\\x1b[2J\\x1b[H\\u202e');
    const show = await human(['instances', 'show', INSTANCE]);
    expect(show.code).toBe(0);
    expect(show.stdout).toContain('http://127.0.0.1:9/\\x1b[2J\\x1b[H\\u202e');
  });

  it('revocations: name escaped', async () => {
    const r = await human(['revocations']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('gone\\x1b]0;pwned\\x07');
  });

  it("sentences and the daemon's refusals on stderr are escaped", async () => {
    const refused = await human(['instances', 'show', `nope${TITLE}\u009b2J\u202e`]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('nope\\x1b]0;pwned\\x07\\x9b2J\\u202e');
    const revoked = await human(['keys', 'revoke', KEY_IDS[1]!]);
    expect(revoked.code).toBe(0);
    expect(revoked.stdout).toContain('("csi\\x9b31m") of instance gpu-1');
  });

  it('--json keeps the exact values, with C1 and bidi characters as \\u escapes', async () => {
    const r = await cli.run('keys', 'list', '--json');
    expect(r.code).toBe(0);
    expect(RAW.test(r.stdout.replaceAll('\n', ''))).toBe(false);
    const keys = JSON.parse(r.stdout) as KeyView[];
    expect(keys.map((k) => k.name).sort()).toEqual([...NAMES, REVOKED_NAME].sort());
    const instances = await cli.json<{ id: string }[]>('instances', 'list');
    expect(instances.map((i) => i.id)).toEqual([INSTANCE, DEAD]);
  });
});

it("the daemon's log lines (JSON) escape what they quote from the store", () => {
  const line = d.rawLogs.find((l) => l.includes('upstream token not loaded'));
  expect(line).toBeDefined();
  expect(RAW.test(line!)).toBe(false);
  expect((JSON.parse(line!) as { instance: string }).instance).toBe(INSTANCE);
  for (const l of d.rawLogs) expect(RAW.test(l), l).toBe(false);
});

describe('the console draws names from the store escaped', () => {
  it('instances, keys, the revoke question and revocations: no frame holds a raw control character', async () => {
    const client = new DaemonClient(d.config.socket);
    const ui = renderInk(
      createElement(ConsoleApp, { client, colour: true, retryMs: 20, pollMs: 3_600_000, tickMs: 3_600_000 }),
      { columns: 120, rows: 30, input: (terminal) => new KeystrokeInput(terminal) },
    );
    try {
      await ui.waitForFrame('http://127.0.0.1:9/\\x1b[2J\\x1b[H\\u202e');
      await ui.press('enter');
      await ui.waitForFrame('invoice\\u202egpj.exe');
      await ui.press('x');
      await ui.waitForFrame('Revoke key "\\x1b[2J\\x1b[Hci-bot"');
      await ui.press('n');
      await ui.press('3');
      await ui.waitForFrame('gone\\x1b]0;pwned\\x07');
      for (const frame of ui.stdout.rawFrames) {
        expect(
          RAW.test(frame.replace(SGR, '').replaceAll('\n', '')),
          `a console frame holds a raw control character: ${JSON.stringify(frame)}`,
        ).toBe(false);
      }
    } finally {
      await ui.unmount();
      await client.close();
    }
  });
});
