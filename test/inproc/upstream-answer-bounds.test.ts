/**
 * A model server's answer, bounded: its size, its error body, its time, what follows [DONE], and
 * the shapes it may take. One describe per defect found, its story above it.
 */
import { describe, expect, it, vi } from 'vitest';
import { obError } from '../../src/errors.js';
import { MAX_CHOICES } from '../../src/wire/chat-response.js';
import { SseRelay } from '../../src/wire/sse-relay.js';
import {
  alongside,
  ask,
  errorEvents,
  expectUpstreamAborted,
  useHostilePair,
  useRawUpstreamDaemon,
} from '../helpers/hostile-upstream.js';
import { chatBody, expectedTokens, MODEL, post, sseFrames, streamTokens } from '../reliability/harness.js';

/**
 * Regression: an error status's body was collected whole, so a 200 MB error body took
 * 200 MB of memory before the client got its answer. Now an error body is capped (default
 * 64 KiB): past it the client gets 502 upstream_error naming the upstream status, and the
 * upstream request is aborted; under it the status and message are passed on as before.
 */
describe('an error body is capped', () => {
  const p = useHostilePair();

  it('an error body over the cap: 502 upstream_error, upstream aborted', async () => {
    for (const stream of [false, true]) {
      const r = await alongside(p, () => ask(p, '[[sim fail=huge-error errorStatus=503 bodyBytes=209715200]]', stream));
      expect({ status: r.status, json: r.json }).toEqual({
        status: 502,
        json: obError('upstream_error', {
          message: 'The model server answered HTTP 503 with an error body larger than 65536 bytes; it was not relayed.',
        }).toBody(),
      });
      await expectUpstreamAborted(p.hostile);
    }
  });

  it('an error body under the cap: the same status and its message', async () => {
    const r = await alongside(p, () => ask(p, '[[sim fail=huge-error errorStatus=503 bodyBytes=1000]]', false));
    expect({ status: r.status, json: r.json }).toEqual({
      status: 503,
      json: {
        error: {
          message: `Model server error (HTTP 503): ${'a'.repeat(1000)}`,
          type: 'api_error',
          code: 'upstream_error',
          param: null,
        },
      },
    });
  });
});

/**
 * Regression: a non-streaming answer was collected whole, whatever its size: a 200 MB
 * answer took 400 MB of RSS and blocked the event loop 1.5 s, and an endless one grew RSS by
 * about 48 MB/s until the kernel killed the gateway. Now a plain answer is capped (default
 * 32 MiB, here 1 MiB): past it, or when its Content-Length announces more, the client gets 502
 * upstream_error and the upstream request is aborted.
 */
describe('a plain answer is capped', () => {
  const CAP = 1024 * 1024;
  const tooLarge = obError('upstream_error', {
    message: `The model server's answer is larger than ${CAP} bytes; it was not relayed.`,
  }).toBody();

  const p = useHostilePair({ maxAnswerBytes: CAP });

  it('a huge answer (its Content-Length over the cap): 502 upstream_error, upstream aborted', async () => {
    const r = await alongside(p, () => ask(p, `[[sim fail=huge-body bodyBytes=${8 * CAP}]]`, false));
    expect({ status: r.status, json: r.json }).toEqual({ status: 502, json: tooLarge });
    await expectUpstreamAborted(p.hostile);
  });

  it('an endless answer (chunked, no length): 502 upstream_error, upstream aborted', async () => {
    for (const mode of ['endless-body', 'endless-line']) {
      const r = await alongside(p, () => ask(p, `[[sim fail=${mode}]]`, false));
      expect({ mode, status: r.status, json: r.json }).toEqual({ mode, status: 502, json: tooLarge });
      await expectUpstreamAborted(p.hostile);
    }
  });

  it('an answer under the cap is relayed whole', async () => {
    const r = await alongside(p, () => ask(p, `[[sim fail=huge-body bodyBytes=${CAP - 4096}]]`, false));
    expect(r.status).toBe(200);
    const json = r.json as { choices: { message: { content: string } }[] };
    expect(json.choices[0]?.message.content).toBe('a'.repeat(CAP - 4096));
  });
});

/**
 * Regression: after `[DONE]` the proxy kept reading a model server that never ended
 * its body (40 s, until the upstream stopped; with the default idle time-out, five minutes), so
 * the request held its upstream connection and its slot. Now the rest of the body is drained
 * only briefly (a few KiB, a second), for the connection's reuse, then the request is aborted.
 */
describe('what follows [DONE] is drained briefly, then aborted', () => {
  // A long idle time-out, as in production: only the drain bound can end the request soon.
  const p = useHostilePair({ idleTimeoutMs: 120_000, upstreamTimeoutMs: 120_000 });

  it('the relay stops at [DONE]', () => {
    const relay = new SseRelay('chatcmpl-x', false);
    expect(relay.push(Buffer.from('data: [DONE]\n\ndata: {"id":"a"}\n\n'))).toBe('data: [DONE]\n\n');
    expect(relay.done).toBe(true);
  });

  it('the client gets the whole stream, and the upstream request is aborted soon after [DONE]', async () => {
    const r = await alongside(p, () => ask(p, '[[sim fail=hang-after-done]]', true));
    expect(r.status).toBe(200);
    expect(streamTokens(sseFrames(r.text))).toEqual(expectedTokens(4));
    expect(r.text.endsWith('data: [DONE]\n\n')).toBe(true);
    // Well within the 120 s idle time-out (eventually gives it 10 s).
    await expectUpstreamAborted(p.hostile);
  });
});

/**
 * Regression: nothing bounded a response's total time. A model server that streams
 * well-formed events for ever, or never ends a plain body, held its request (and the client)
 * as long as it liked, the idle time-out never firing. A response now has a total deadline
 * (default 30 min, here 1.5 s): past it, 502 upstream_error, or mid-stream one upstream_error
 * event, and the upstream request is aborted.
 */
describe('an answer has a total deadline', () => {
  const late = obError('upstream_error', {
    message: "The model server's answer took longer than 1.5 s; it was ended.",
  }).toBody();

  const p = useHostilePair({ responseDeadlineMs: 1_500, idleTimeoutMs: 60_000 });

  it('an endless stream of well-formed events: the tokens, then one upstream_error event, no [DONE]', async () => {
    const r = await alongside(p, () => ask(p, '[[sim fail=endless-body tokensPerSecond=50]]', true));
    expect(r.status).toBe(200);
    expect(streamTokens(sseFrames(r.text)).length).toBeGreaterThan(0);
    expect(errorEvents(r.text)).toEqual([late]);
    expect(sseFrames(r.text).at(-1)).toBe(`data: ${JSON.stringify(late)}`);
    expect(r.text).not.toContain('[DONE]');
    await expectUpstreamAborted(p.hostile);
  });

  it('a plain answer whose body never ends: 502 upstream_error', async () => {
    const r = await alongside(p, () => ask(p, '[[sim fail=hang-after-done]]', false));
    expect({ status: r.status, json: r.json }).toEqual({ status: 502, json: late });
    await expectUpstreamAborted(p.hostile);
  });
});

/**
 * Regression (hostile model server): a plain answer's `choices` had no bound
 * but the answer's byte cap, and every entry was filled in to the shape of docs/contract.md §3.3. A 4 MB answer
 * of two million `0`s reached the client as 165 MB (41 times the bytes, five times the 32 MiB
 * cap on an answer) after seconds of the event loop; one of 16 million within the cap took 14 s
 * and 2 GB of heap, then failed re-encoding as "upstream_unavailable". A request asks for one
 * choice (`n` must be 1), so an answer with more than MAX_CHOICES (128, OpenAI's own limit on
 * `n`) is now not a chat completion: 502 upstream_error, whether its shape needed filling in or
 * not. Up to 128 are relayed as before.
 */
describe("an answer's choices are bounded by MAX_CHOICES", () => {
  const full = '{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}';
  const answer = (choices: string, idFirst = true): string =>
    idFirst
      ? `{"id":"up","object":"chat.completion","created":1,"model":"${MODEL}","choices":[${choices}]}`
      : `{"object":"chat.completion","id":"up","created":1,"model":"${MODEL}","choices":[${choices}]}`;
  const many = (n: number, choice: string): string => Array.from({ length: n }, () => choice).join(',');

  /** The answers, by the request's content. */
  const ANSWERS: Record<string, string> = {
    zeros: answer(many(2_000_000, '0')),
    empties: answer(many(MAX_CHOICES + 1, '{}'), false),
    fullOver: answer(many(MAX_CHOICES + 1, full)),
    fullAtCap: answer(many(MAX_CHOICES, full)),
    emptiesAtCap: answer(many(MAX_CHOICES, '{}'), false),
  };

  const srv = useRawUpstreamDaemon(({ content }) => ({ body: ANSWERS[content] ?? '' }));

  const notACompletion = obError('upstream_error', {
    message: "The model server sent an answer that is not a chat completion. Check the instance's endpoint.",
  }).toBody();

  it.each(['zeros', 'empties', 'fullOver'])('%s: more than 128 choices is 502 upstream_error', async (which) => {
    const r = await post(srv.h.baseUrl, srv.key, chatBody(which));
    expect({ status: r.status, json: r.json, bytes: r.text.length }).toEqual({
      status: 502,
      json: notACompletion,
      bytes: JSON.stringify(notACompletion).length,
    });
  });

  it('128 choices are relayed: as sent with our id, or filled in to the shape of docs/contract.md §3.3', async () => {
    const sent = await post(srv.h.baseUrl, srv.key, chatBody('fullAtCap'));
    expect(sent.status).toBe(200);
    const id = (sent.json as { id: string }).id;
    expect(sent.text).toBe(ANSWERS.fullAtCap!.replace('"id":"up"', `"id":"${id}"`));

    const filled = await post(srv.h.baseUrl, srv.key, chatBody('emptiesAtCap'));
    expect(filled.status).toBe(200);
    const body = filled.json as { choices: unknown[] };
    expect(body.choices).toHaveLength(MAX_CHOICES);
    expect(body.choices[MAX_CHOICES - 1]).toEqual({
      index: MAX_CHOICES - 1,
      message: { role: 'assistant', content: '' },
      finish_reason: null,
    });
  });
});

/**
 * Regression (one model server takes the gateway down): an SSE line that never ended
 * made the relay concatenate its whole pending buffer again on every read, so its cost grew
 * quadratically (7 CPU-seconds per second, /healthz at 3-5 s, other instances timing out, RSS
 * 85 -> 440 MB) and nothing bounded it. Now pending bytes are kept as pieces and joined once,
 * when the frame ends, and an unfinished frame past the cap (default 1 MiB) ends the stream with
 * one upstream_error event and aborts the upstream request.
 */
describe('an endless SSE line is capped, in linear time', () => {
  const HEAD = 'data: {"id":"a","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"';
  const PIECE = Buffer.alloc(64 * 1024, 'a');

  it('holds an unfinished frame as pieces, copies each byte a bounded number of times, and stops at the cap', () => {
    const cap = 1024 * 1024;
    const relay = new SseRelay('chatcmpl-x', false, undefined, cap);
    let copied = 0;
    const original = Buffer.concat.bind(Buffer);
    const concat = vi.spyOn(Buffer, 'concat').mockImplementation((list, total) => {
      const out = original(list, total);
      copied += out.length;
      return out;
    });
    try {
      let fed = 0;
      expect(relay.push(Buffer.from(HEAD))).toBe('');
      fed += HEAD.length;
      for (let i = 0; i < 15; i++) {
        expect(relay.push(PIECE)).toBe('');
        fed += PIECE.length;
        // Never more than what the model server sent of this frame, and never past the cap.
        expect(relay.pendingBytes).toBe(fed);
        expect(relay.pendingBytes).toBeLessThanOrEqual(cap);
      }
      // The old code copied the whole pending buffer on every read: 15 reads, 8 MB copied for 1 MB sent.
      expect(copied).toBeLessThanOrEqual(2 * fed);
      expect(relay.invalid).toBe(false);
      // Past the cap: refused, and the pieces are let go.
      expect(relay.push(PIECE)).toBe('');
      expect({ invalid: relay.invalid, reason: relay.invalidReason, pending: relay.pendingBytes }).toEqual({
        invalid: true,
        reason: 'frame_too_large',
        pending: 0,
      });
    } finally {
      concat.mockRestore();
    }
  });

  const p = useHostilePair();

  it('through the daemon: one upstream_error event, no [DONE], the upstream request aborted, a neighbour unharmed', async () => {
    const r = await alongside(p, () => ask(p, '[[sim fail=endless-line]]', true));
    expect(r.status).toBe(200);
    expect(r.text).toBe(
      `data: ${JSON.stringify(obError('upstream_error', { message: 'The model server sent an event larger than 1048576 bytes; the stream was ended.' }).toBody())}\n\n`,
    );
    await expectUpstreamAborted(p.hostile);
  });
});
