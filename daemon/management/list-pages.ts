import { Readable } from 'node:stream';
import type { FastifyReply } from 'fastify';
import type { KeyRecord } from '../../src/domain/key.js';
import { obError } from '../../src/errors.js';
import { clipped } from '../../src/printable.js';
import type { KeyPage, Registry } from '../../src/services/registry.js';
import { nextTurn } from '../turn-budget.js';

/** The largest page a list route answers with (`limit`). */
export const MAX_PAGE = 10_000;

/**
 * Records written between two turns of the event loop when a whole list is sent: about a
 * millisecond of views and JSON, so a list of 1,000,000 keys never holds a request for longer.
 */
export const STREAM_PAGE = 500;

/** `limit`, a whole number from 1 to MAX_PAGE; undefined: the whole list. */
export function pageLimit(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > MAX_PAGE)
    throw obError('invalid_argument', {
      param: 'limit',
      message: `limit must be a whole number from 1 to ${MAX_PAGE}, got ${JSON.stringify(clipped(value))}.`,
    });
  return n;
}

/** `after`, the cursor a page gave (`next`): a key id. */
export function pageAfter(registry: Registry, id: string | undefined): KeyRecord | null {
  if (id === undefined) return null;
  const key = registry.keys.get(id);
  if (key === undefined)
    throw obError('invalid_argument', {
      param: 'after',
      message: `after must be the next cursor a page gave (a key id); no key has the id ${JSON.stringify(clipped(id))}.`,
    });
  return key;
}

/**
 * A whole list sent in pieces, STREAM_PAGE records at a time with a turn of the event loop between
 * them, as one JSON array or as JSON lines (`lines`). Each piece starts after the last record
 * sent, so a key added or revoked meanwhile neither repeats a record nor stops the list.
 */
export function sendWholeList<V>(
  reply: FastifyReply,
  lines: boolean,
  pageAfterRecord: (after: KeyRecord | null, limit: number) => KeyPage,
  view: (k: KeyRecord) => V,
  lookup: (id: string) => KeyRecord | undefined,
): FastifyReply {
  async function* pieces(): AsyncGenerator<string> {
    let after: KeyRecord | null = null;
    let first = true;
    if (!lines) yield '[';
    for (;;) {
      const page = pageAfterRecord(after, STREAM_PAGE);
      let text = '';
      for (const k of page.records) {
        const json = JSON.stringify(view(k));
        text += lines ? `${json}\n` : first ? json : `,${json}`;
        first = false;
      }
      if (text !== '') yield text;
      const next = page.next === null ? undefined : lookup(page.next);
      if (next === undefined) break;
      after = next;
      await nextTurn();
    }
    if (!lines) yield ']';
  }
  return reply
    .type(lines ? 'application/x-ndjson' : 'application/json; charset=utf-8')
    .send(Readable.from(pieces(), { objectMode: false }));
}

/** `items` as a JSON array, viewed and written STREAM_PAGE at a time with a turn of the event loop between. */
async function* arrayPieces<T>(items: readonly T[], view: (item: T) => unknown, head: string, tail: string) {
  let text = `${head}[`;
  for (let i = 0; i < items.length; i++) {
    text += (i === 0 ? '' : ',') + JSON.stringify(view(items[i]!));
    if ((i + 1) % STREAM_PAGE === 0) {
      yield text;
      text = '';
      await nextTurn();
    }
  }
  yield `${text}]${tail}`;
}

/**
 * `items` sent as one JSON array in pieces, as sendWholeList sends keys: STREAM_PAGE of them
 * viewed and written between two turns of the event loop. 50,000 instances answered whole held
 * every request for a quarter of a second.
 */
export function sendArrayInPieces<T>(
  reply: FastifyReply,
  items: readonly T[],
  view: (item: T) => unknown,
): FastifyReply {
  return reply
    .type('application/json; charset=utf-8')
    .send(Readable.from(arrayPieces(items, view, '', ''), { objectMode: false }));
}

/**
 * A page (`{"<field>":[...],"next":...}`, the body JSON.stringify gives) sent in pieces as
 * sendArrayInPieces sends an array: a page of MAX_PAGE keys viewed and written at once held every
 * request for tens of milliseconds.
 */
export function sendPageInPieces<T>(
  reply: FastifyReply,
  field: string,
  page: { records: readonly T[]; next: string | null },
  view: (item: T) => unknown,
): FastifyReply {
  const pieces = arrayPieces(page.records, view, `{${JSON.stringify(field)}:`, `,"next":${JSON.stringify(page.next)}}`);
  return reply.type('application/json; charset=utf-8').send(Readable.from(pieces, { objectMode: false }));
}
