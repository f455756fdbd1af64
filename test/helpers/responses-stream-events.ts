/**
 * A chat stream through the ResponsesStreamTranslator: `translate` gives its Responses events
 * (their sequence numbers checked), `accumulate` runs them through the openai SDK's own
 * accumulator.
 */
import { accumulateResponse } from 'openai/lib/responses/ResponseAccumulator';
import type { Response, ResponseStreamEvent } from 'openai/resources/responses/responses';
import { expect } from 'vitest';
import { ResponsesStreamTranslator } from '../../src/apis/responses/stream.js';
import { contextFor, parseFrames } from './responses-translate.js';

type Json = Record<string, unknown>;

/** Feeds chunks and the end; returns the parsed events, checked for consecutive sequence numbers. */
export function translate(request: Json, chunks: unknown[]): { type: string; data: Json }[] {
  const t = new ResponsesStreamTranslator(contextFor(request));
  let out = '';
  for (const c of chunks) out += t.push(c);
  out += t.end();
  const events = parseFrames(out);
  events.forEach((e, i) => expect(e.data.sequence_number).toBe(i));
  expect(t.nextSequence).toBe(events.length);
  return events;
}

/** Runs the events through the openai SDK's own accumulator; returns its snapshot before the last event. */
export function accumulate(events: { type: string; data: Json }[]): Response {
  let snapshot: Response | undefined;
  for (const e of events.slice(0, -1))
    snapshot = accumulateResponse(e.data as unknown as ResponseStreamEvent, snapshot);
  const final = accumulateResponse(events.at(-1)?.data as unknown as ResponseStreamEvent, snapshot);
  expect(final.output).toEqual((events.at(-1)?.data.response as Json).output);
  return snapshot as Response;
}
