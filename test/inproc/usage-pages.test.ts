/**
 * `GET /v1/usage` and `ob-proxy usage` a page at a time: a cursor walks every key once, in the
 * order of `GET /v1/keys`, filters hold on every page, the whole report as JSON lines is the pages
 * joined, and the CLI prints the next page's command, every key as lines, or every key as CSV.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { UsageLine, UsageReportPage } from '../../src/wire/usage-report.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { bigStoreData } from '../helpers/big-store.js';
import { type Inproc, buildInproc } from '../helpers/inproc.js';
import { type InprocCli, inprocCli } from '../helpers/inproc-cli.js';
import { refused } from '../helpers/cli-outcome.js';

const KEYS = 1200;
let d: Inproc;
let cli: InprocCli;
const data = bigStoreData({ instances: 10, keys: KEYS, events: 0 });
// Every key made at one time: by creation is by id.
const allIds = data.keys.map((k) => k.id).sort();
const AT = '2026-11-01T00:00:00.000Z';

beforeAll(async () => {
  d = await buildInproc({}, {}, new MemoryStore(data));
  cli = inprocCli(d.daemon.management);
});

afterAll(async () => {
  await d?.close();
});

// A page's keys, in the order of the key list (the report orders a pack's keys by id as a person reads them).
const keyIds = (page: UsageReportPage): string[] =>
  page.packs.flatMap((p) => p.keys.map((k) => k.id)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));

async function walk(query: string, limit: number): Promise<UsageReportPage[]> {
  const pages: UsageReportPage[] = [];
  let after: string | null = null;
  for (;;) {
    const res = await d.manage('GET', `/v1/usage?${query}&limit=${limit}${after === null ? '' : `&after=${after}`}`);
    expect(res.status).toBe(200);
    const page = res.json as UsageReportPage;
    pages.push(page);
    if (page.next === null) return pages;
    after = page.next;
  }
}

describe('GET /v1/usage a page at a time', () => {
  it('a cursor walks every key once, in the order of the key list; each page reports its own keys', async () => {
    const pages = await walk('', 500);
    expect(pages.length).toBe(3);
    pages.forEach((page, i) => {
      expect(keyIds(page)).toEqual(allIds.slice(i * 500, (i + 1) * 500));
      expect(page.next).toBe(i === 2 ? null : allIds[(i + 1) * 500 - 1]);
    });
    // A pack's total is that of the keys the page shows.
    const pack = pages[0]!.packs[0]!;
    expect(pack.total.requests).toBe(pack.keys.reduce((n, k) => n + k.requests, 0));
    // The whole report (no page asked for) has every key's counters, as before pages.
    const whole = (await d.manage('GET', '/v1/usage')).json as UsageReportPage;
    expect(whole.next).toBeUndefined();
    const sum = (ps: UsageReportPage[]): number => ps.flatMap((p) => p.packs).reduce((n, p) => n + p.total.requests, 0);
    expect(sum(pages)).toBe(sum([whole]));
    expect(sum([whole])).toBe((KEYS * (KEYS - 1)) / 2);
  });

  it('filters hold on every page: one instance, one key, a since that keeps none', async () => {
    const pages = await walk('instance=big-3', 7);
    expect(pages.flatMap(keyIds)).toEqual(
      data.keys
        .filter((k) => k.instance === 'big-3')
        .map((k) => k.id)
        .sort(),
    );
    const one = allIds[42]!;
    expect((await walk(`key=${one}`, 5)).flatMap(keyIds)).toEqual([one]);
    expect((await d.manage('GET', '/v1/usage?since=2026-11-02T00:00:00Z&limit=10')).json).toEqual({
      since: '2026-11-02T00:00:00.000Z',
      packs: [],
      next: null,
    });
  });

  it('format=lines is every key with its pack, one JSON line each, in the order of the pages', async () => {
    const res = await d.manage('GET', '/v1/usage?format=lines');
    expect(res.headers['content-type']).toBe('application/x-ndjson');
    const lines = res.text
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as UsageLine);
    expect(lines.map((l) => l.id)).toEqual(allIds);
    const k = data.keys.find((x) => x.id === allIds[4])!;
    expect(lines[4]).toEqual({
      instance: k.instance,
      deployment: k.deployment,
      model: 'gemma4:26b',
      state: 'ready',
      packEndsAt: null,
      id: k.id,
      name: k.name,
      status: k.status,
      requests: k.usage.requests,
      promptTokens: k.usage.promptTokens,
      completionTokens: k.usage.completionTokens,
      reasoningTokens: 0,
      estimatedTokens: 0,
      errors: 0,
      disconnects: 0,
      firstUsedAt: null,
      lastUsedAt: null,
      byRoute: {},
    });
  });

  it('refuses a limit out of range and a cursor that names no key', async () => {
    const res = await d.manage('GET', '/v1/usage?limit=0');
    expect([res.status, (res.json as { error: { code: string; param: string } }).error]).toMatchObject([
      400,
      { code: 'invalid_argument', param: 'limit' },
    ]);
    const bad = await d.manage('GET', '/v1/usage?limit=5&after=nosuchkey000');
    expect([bad.status, (bad.json as { error: { param: string } }).error.param]).toEqual([400, 'after']);
  });
});

describe('ob-proxy usage a page at a time', () => {
  it('shows a page and the command for the next; --after goes on from it', async () => {
    const first = await cli.run('usage', '--instance', 'big-1', '--limit', '2');
    const big1 = data.keys
      .filter((k) => k.instance === 'big-1')
      .map((k) => k.id)
      .sort();
    expect(first.code).toBe(0);
    expect(first.stdout).toContain(`${big1[0]} `);
    expect(first.stdout).toContain(`${big1[1]} `);
    expect(first.stdout).not.toContain(big1[2]);
    expect(
      first.stdout.endsWith(
        `Showed 2; more after them: ob-proxy usage --after ${big1[1]} --limit 2 (or --all for every one).\n`,
      ),
    ).toBe(true);
    const next = await cli.json<UsageReportPage>('usage', '--instance', 'big-1', '--limit', '2', '--after', big1[1]!);
    expect(keyIds(next)).toEqual(big1.slice(2, 4));
    expect(next.next).toBe(big1[3]);
  });

  it('--all writes every key as a JSON line, and with --csv as a CSV line', async () => {
    const lines = await cli.run('usage', '--all');
    expect(lines.code).toBe(0);
    const parsed = lines.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l) as UsageLine);
    expect(parsed.map((l) => l.id)).toEqual(allIds);
    const csv = await cli.run('usage', '--all', '--csv', '--instance', 'big-2');
    expect(csv.code).toBe(0);
    const rows = csv.stdout.split('\r\n');
    expect(rows[0]).toBe(
      'instance,deployment,state,key,name,status,requests,prompt_tokens,completion_tokens,reasoning_tokens,estimated_tokens,errors,disconnects,first_used_at,last_used_at',
    );
    const big2 = data.keys.filter((k) => k.instance === 'big-2').sort((a, b) => (a.id < b.id ? -1 : 1));
    expect(rows.length).toBe(big2.length + 2);
    expect(rows[rows.length - 1]).toBe('');
    const k = big2[0]!;
    expect(rows[1]).toBe(
      `big-2,dep-2,ready,${k.id},${k.name},${k.status},${k.usage.requests},${k.usage.promptTokens},${k.usage.completionTokens},0,0,0,0,,`,
    );
  });

  it('refuses --csv without --by or --all, and --by with a page', async () => {
    expect(await cli.run('usage', '--csv')).toEqual(
      refused(2, '--until goes with --by hour or --by day; --csv with --by or --all.'),
    );
    expect(await cli.run('usage', '--by', 'hour', '--all')).toEqual(
      refused(2, '--by reports every key of the filter: give it without --limit, --after or --all.'),
    );
    expect(await cli.run('usage', '--all', '--limit', '5')).toEqual(
      refused(2, '--all lists everything: give it without --limit or --after.'),
    );
    expect(AT).toBe(data.keys[0]!.createdAt);
  });
});
