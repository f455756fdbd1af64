import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { KeyRecord } from '../../src/domain/key.js';
import type { Registry } from '../../src/services/registry.js';
import {
  type PackHead,
  type UsageFilter,
  addToTotal,
  byCreation,
  chosenBy,
  emptyTotal,
  keyRow,
  packFor,
  packOf,
  packOrder,
} from '../../src/wire/usage-report.js';
import { TurnBudget, nextTurn } from '../turn-budget.js';
import { STREAM_PAGE } from './list-pages.js';
import { sortInPieces } from './sort-in-pieces.js';

const byId = (a: KeyRecord, b: KeyRecord): number => a.id.localeCompare(b.id);

/** Keys scanned, or comparisons made, between two turns of the event loop. */
const WORK_A_TURN = STREAM_PAGE * 4;

/**
 * The chosen keys in the report's order (creation time, then id by localeCompare), a page of the
 * key list at a time (of one instance's keys, a sort in pieces). The list is by creation time, then by id as code units: the same order but
 * among keys made at the same time (ids of mixed case), so only those runs are sorted again.
 */
async function chosenKeys(registry: Registry, filter: UsageFilter): Promise<KeyRecord[]> {
  const keep = chosenBy(filter);
  const out: KeyRecord[] = [];
  if (filter.instance !== undefined) {
    // One instance's keys: a page of them orders them all again (keyPage), so they are sorted once.
    const own = registry.keysOf(filter.instance);
    const budget = new TurnBudget(STREAM_PAGE * 8);
    for (let i = 0; i < own.length; i++) {
      if (keep(own[i]!)) out.push(own[i]!);
      if (budget.spent()) await budget.pause();
    }
    return sortInPieces(out, byCreation);
  }
  let after: KeyRecord | null = null;
  for (;;) {
    const page = registry.keyPage({ after, limit: STREAM_PAGE, keep });
    for (const k of page.records) out.push(k);
    if (page.next === null) break;
    const last = page.records[page.records.length - 1];
    const next = last?.id === page.next ? last : registry.keys.get(page.next);
    if (next === undefined) break;
    after = next;
    await nextTurn();
  }
  // The runs are sorted again by id: a short one at once (Array.prototype.sort is stable, as
  // sortInPieces is), a long one in pieces. The scan and the sorts count as work, with a turn of
  // the event loop every WORK_A_TURN: at 500,000 keys, made ten at a time, they held it for 40 ms.
  const budget = new TurnBudget(WORK_A_TURN);
  for (let i = 0; i < out.length;) {
    let j = i + 1;
    while (j < out.length && out[j]!.createdAt === out[i]!.createdAt) {
      j++;
      if (budget.spent()) await budget.pause();
    }
    const m = j - i;
    if (m >= WORK_A_TURN) {
      const run = await sortInPieces(out.slice(i, j), byId);
      for (let r = 0; r < m; r++) out[i + r] = run[r]!;
      budget.restart();
    } else if (m > 1) {
      const run = out.slice(i, j).sort(byId);
      for (let r = 0; r < m; r++) out[i + r] = run[r]!;
      if (budget.spent(m * Math.ceil(Math.log2(m)))) await budget.pause();
    } else if (budget.spent()) await budget.pause();
    i = j;
  }
  return out;
}

/**
 * The whole usage report (`GET /v1/usage` without a page), the same body as `usageReport` gives,
 * made and sent in pieces: its keys gathered, grouped into packs and the packs sorted with a turn
 * of the event loop every STREAM_PAGE keys, then written a STREAM_PAGE keys at a time. At 500,000
 * keys the report made and stringified at once held every request for seconds. A pack holds its
 * keys until they are written, not their rows: half a million rows (each a few objects) made
 * before the first was written all outlived the young generation, and copying them there held
 * the loop for tens of milliseconds at each collection. Each row and the pack's total are made as
 * they are written, so they sum what was written.
 */
export async function sendWholeUsage(
  reply: FastifyReply,
  registry: Registry,
  filter: UsageFilter,
): Promise<FastifyReply> {
  const keys = await chosenKeys(registry, filter);
  const grouped = new Map<string, { head: PackHead; keys: KeyRecord[] }>();
  const grouping = new TurnBudget(STREAM_PAGE);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i]!;
    packFor(grouped, k, () => ({ head: packOf(registry.instances, k), keys: [] })).keys.push(k);
    if (grouping.spent()) await grouping.pause();
  }
  const packs = await sortInPieces([...grouped.values()], (a, b) => packOrder(a.head, b.head));
  const since = filter.since ?? null;
  async function* pieces(): AsyncGenerator<string> {
    let text = `{"since":${JSON.stringify(since)},"packs":[`;
    const writing = new TurnBudget(STREAM_PAGE);
    for (let p = 0; p < packs.length; p++) {
      const { head, keys: own } = packs[p]!;
      let total = emptyTotal();
      // The pack's own fields, then its keys, then its total: the order of a PackUsage.
      text += `${p === 0 ? '' : ','}${JSON.stringify(head).slice(0, -1)},"keys":[`;
      for (let i = 0; i < own.length; i++) {
        text += (i === 0 ? '' : ',') + JSON.stringify(keyRow(own[i]!));
        total = addToTotal(total, own[i]!);
        if (writing.spent()) {
          yield text;
          text = '';
          await writing.pause();
        }
      }
      text += `],"total":${JSON.stringify(total)}}`;
    }
    yield `${text}]}`;
  }
  return reply.type('application/json; charset=utf-8').send(Readable.from(pieces(), { objectMode: false }));
}
