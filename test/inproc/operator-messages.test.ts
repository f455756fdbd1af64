/**
 * What the daemon and CLI say back to an operator: no raw control characters, no credentials,
 * no huge values, OpenAI-shaped refusals, a default key's write said truly. One describe per
 * defect found, its story above it.
 */
import { createHash } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { createElement } from 'react';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConsoleApp } from '../../cli/console/console-app.js';
import { KeystrokeInput } from '../../cli/console/keystroke-input.js';
import { DaemonClient } from '../../cli/daemon-client.js';
import { type Daemon, startDaemon } from '../../daemon/build-daemon.js';
import { resolveConfig } from '../../src/config-resolve.js';
import { obError } from '../../src/errors.js';
import { QUOTE_MAX } from '../../src/printable.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import type { Mutation } from '../../src/store/store.js';
import type { KeyView } from '../../src/wire/views.js';
import { renderInk } from '../helpers/ink.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';
import { buildInproc, type Inproc, MODEL } from '../helpers/inproc.js';
import { tmpHome } from '../helpers/processes.js';
import { type Harness, startHarness } from '../reliability/harness.js';

/**
 * Regression (operators' mistakes): names, ids, endpoints and hints already in a store
 * (a hand edit, an older version) were printed raw by `keys list` and the console: an ESC
 * sequence in a key name cleared the screen, an OSC one set the window title, a bidi override
 * made a name read backwards. The store below is hostile in every field a person reads; every
 * human output of the CLI, every console frame and the daemon's log must show those characters as
 * escapes, and --json must keep the exact values.
 */
describe('control characters are shown as escapes', () => {
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
});

/**
 * Regression: an endpoint carrying credentials that did not parse as a URL (a port out of range,
 * a password with a character URLs do not take) was quoted whole in the refusal:
 * `Endpoint "http://ops:hunter2@10.0.0.5:99999" is not a URL`, the password in clear on stderr,
 * in the terminal's scrollback and in the logs of the script that ran it. Now the refusal quotes
 * the endpoint without what stands before its last @ and after a ? or #.
 */
describe('endpoint credentials are withheld from refusals', () => {
  let d: Harness;
  let cli: InprocCli;
  beforeAll(async () => {
    d = await startHarness();
    cli = inprocCli(d.daemon.management);
  });
  afterAll(async () => {
    await d?.stop();
  });

  const HINT = "is not a URL; give the model server's base URL, e.g. http://10.0.0.5:11434.";

  it('quotes an endpoint that is not a URL without its password or token', async () => {
    const cases: [string, string][] = [
      ['http://ops:hunter2@10.0.0.5:99999', 'http://…@10.0.0.5:99999'],
      ['http://ops:hun/ter#2@10.0.0.5:99999', 'http://…@10.0.0.5:99999'],
      ['http://10.0.0.5:99999/?api_key=hunter2', 'http://10.0.0.5:99999/?…'],
      ['https://ops:hunter2@[fd00::5:11434', 'https://…@[fd00::5:11434'],
    ];
    for (const [endpoint, quoted] of cases) {
      for (const args of [
        ['instances', 'add', 'gpu-1', '--model', 'gemma4:26b', '--endpoint', endpoint],
        ['instances', 'add', 'gpu-1', '--model', 'gemma4:26b', '--endpoint', endpoint, '--json'],
      ]) {
        const r = await cli.run(...args);
        expect({ endpoint, code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({
          endpoint,
          code: 1,
          stdout: '',
          stderr: `error: Endpoint "${quoted}" ${HINT}\n`,
        });
      }
    }
    expect((await cli.run('instances', 'add', 'gpu-1', '--model', 'gemma4:26b')).code).toBe(0);
    const ready = await cli.run('instances', 'ready', 'gpu-1', '--endpoint', 'http://ops:hunter2@10.0.0.5:99999');
    expect([ready.code, ready.stdout, ready.stderr]).toEqual([
      1,
      '',
      `error: Endpoint "http://…@10.0.0.5:99999" ${HINT}\n`,
    ]);
    expect(d.rawLogs.filter((l) => l.includes('hunter2'))).toEqual([]);
  });
});

/**
 * Regression (operators' mistakes): an error quoted the value it refused whole, so a
 * 100 KB model name or token-file path (up to the management body limit)
 * came back as a 100 KB message: one line on the operator's terminal and in every log that keeps
 * the CLI's output. Now a message quotes at most QUOTE_MAX characters of it, then `…`.
 */
describe('errors quote at most QUOTE_MAX characters of the input', () => {
  let d: Inproc;
  beforeAll(async () => {
    d = await buildInproc();
  });
  afterAll(async () => {
    await d.close();
  });

  const huge = 'x'.repeat(100_000);
  const shown = `${'x'.repeat(QUOTE_MAX)}…`;

  async function message(method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown): Promise<string> {
    const r = await d.manage(method, url, body);
    expect(r.status).toBeGreaterThanOrEqual(400);
    return (r.json as { error: { message: string } }).error.message;
  }

  it('an unknown model of 100 KB is quoted to QUOTE_MAX characters', async () => {
    expect(await message('POST', '/v1/instances', { id: 'gpu-1', model: huge })).toBe(
      `Model "${shown}" is not allowed: the allowed models are ${d.config.models.join(', ')}. Allow it first with \`ob-proxy models allow MODEL\`.`,
    );
  });

  it('a token-file path of 100 KB is quoted to QUOTE_MAX characters', async () => {
    await d.manage('POST', '/v1/instances', { id: 'gpu-2', model: MODEL });
    const m = await message('POST', '/v1/instances/gpu-2/ready', {
      endpoint: 'http://127.0.0.1:9',
      upstreamTokenFile: `/${huge}`,
    });
    expect(m).toContain(`/${'x'.repeat(QUOTE_MAX - 1)}…`);
    expect(m.length).toBeLessThan(400);
  });
});

/**
 * Regression (fuzzing): requests that Node's parser or Fastify's router refused before
 * our handlers ran were answered in Fastify's own shape (`{"error":"Bad Request","statusCode":400}`)
 * which OpenAI SDKs cannot read, and the management API answered a too-long id with a bare 414
 * that the CLI reported as "internal_error". Both now answer in our envelope with a sentence.
 */
describe("the framework's refusals answer in our envelope", () => {
  let h: Harness;
  let client: DaemonClient;
  beforeAll(async () => {
    h = await startHarness();
    client = new DaemonClient(h.config.socket);
  });
  afterAll(async () => {
    await client.close();
    await h.stop();
  });

  function raw(bytes: string): Promise<string> {
    const url = new URL(h.baseUrl);
    return new Promise((resolve) => {
      const s = connect(Number(url.port), url.hostname);
      let out = '';
      s.setEncoding('latin1').on('data', (d: string) => {
        out += d;
      });
      s.on('error', () => {});
      s.on('close', () => resolve(out));
      s.on('connect', () => s.end(bytes));
    });
  }

  function parsed(text: string): { status: number; body: unknown } {
    return { status: Number(text.slice(9, 12)), body: JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as unknown };
  }

  it('a malformed request head gets 400 malformed_http in the OpenAI shape', async () => {
    expect(parsed(await raw('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n'))).toEqual({
      status: 400,
      body: obError('malformed_http').toBody(),
    });
    expect(parsed(await raw('GARBAGE\r\n\r\n'))).toEqual({ status: 400, body: obError('malformed_http').toBody() });
  });

  it('headers too large get 431 headers_too_large in the OpenAI shape', async () => {
    const text = await raw(`GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(parsed(text)).toEqual({ status: 431, body: obError('headers_too_large').toBody() });
  });

  it('a management id too long for the router is a clear invalid_argument', async () => {
    const err = await client.revokeKey('a'.repeat(5000)).then(
      () => null,
      (e: unknown) => e as { code: string; message: string },
    );
    expect(err).toMatchObject({
      code: 'invalid_argument',
      message: 'An id in the path is too long: instance ids are at most 64 characters.',
    });
  });
});

/**
 * Regression: when the background default key could not be written, `instances ready` said
 * "nothing was changed" although the instance had become ready. It now says what is true and
 * how to get a key.
 */
describe('ready says what is true when its default key cannot be written', () => {
  /** A store that accepts everything but key records. */
  class NoKeysStore extends MemoryStore {
    override async commit(mutations: readonly Mutation[]): Promise<void> {
      if (mutations.some((m) => m.op === 'putKey'))
        throw obError('store_write_failed', {
          message: 'The store could not be written (ENOSPC); nothing was changed.',
        });
      await super.commit(mutations);
    }
  }

  let daemon: Daemon;
  beforeAll(async () => {
    const home = await tmpHome();
    const { Writable } = await import('node:stream');
    daemon = await startDaemon(resolveConfig({ home, port: 0, logLevel: 'silent' }, {}, homedir()), {
      version: 'test',
      store: new NoKeysStore(),
      logStream: new Writable({ write: (_c, _e, cb) => cb() }),
    });
  });
  afterAll(async () => {
    await daemon.shutdown(0);
  });

  it('says the instance is ready and how to make a key when only the default key failed to be written', async () => {
    const add = await daemon.management.inject({
      method: 'POST',
      url: '/v1/instances',
      payload: { id: 'gpu-1', model: 'gemma4:26b', endpoint: 'http://127.0.0.1:9' },
    });
    expect(add.statusCode).toBe(201);
    const ready = await daemon.management.inject({
      method: 'POST',
      url: '/v1/instances/gpu-1/ready',
      payload: { probe: false },
    });
    expect(ready.statusCode).toBe(503);
    expect(ready.json()).toEqual({
      error: {
        code: 'store_write_failed',
        type: 'store_error',
        param: null,
        message: expect.stringMatching(
          /^Instance gpu-1 is ready, but its default key could not be written \(.*ENOSPC.*\) Once the store is writable, create one with `ob-proxy keys create --instance gpu-1 --name default`\.$/,
        ),
      },
    });
    const shown = await daemon.management.inject({ method: 'GET', url: '/v1/instances/gpu-1' });
    expect(shown.json()).toMatchObject({ state: 'ready', activeKeys: 0 });
  });
});
