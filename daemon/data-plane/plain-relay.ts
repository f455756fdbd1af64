import type { IncomingHttpHeaders } from 'node:http';
import { type ObProxyError, obError } from '../../src/errors.js';
import { encodeJson, normalizeCompletion, usageOf } from '../../src/wire/chat-response.js';
import { spliceCompletionId } from '../../src/wire/completion-splice.js';
import { limitErrors } from '../../src/upstream/answer-limits.js';
import { type Relay, type RelayAnswer, answerHeaders, contentLength } from './upstream-relay.js';
import { jsonHeaders, writeRawError } from './send-error.js';

/**
 * How one client API writes its plain answer, given the model server's bytes (`raw`, `text`
 * decoded, `parsed` its JSON or null): each ends with one of `answer.send`, `answer.notAnAnswer`,
 * `answer.tooDeep`, or `answer.write`. A function, not a subclass: the API's answer is data
 * (its WireApi names it), the collecting and the caps are the same for all.
 */
export type PlainShape = (raw: Buffer, text: string, parsed: unknown, answer: PlainAnswer) => void;

/** Chat's shape (docs/contract.md §3.3): our id spliced in, or the answer re-encoded in chat's shape. */
export const chatShape: PlainShape = (raw, text, parsed, answer) => {
  const c = answer.relay.c;
  // Parsed once, for the shape check and usage; re-serialised only when the shape needs fixing.
  let out: Buffer | string | null = spliceCompletionId(raw, text, parsed, c.id);
  const body =
    out !== null
      ? (parsed as Record<string, unknown>)
      : normalizeCompletion(parsed, c.id, c.model, Math.floor(c.clock.now() / 1000));
  if (body === null) {
    answer.notAnAnswer('a chat completion');
    return;
  }
  out ??= encodeJson(body);
  if (out === null) {
    answer.tooDeep();
    return;
  }
  const usage = usageOf(body);
  answer.send(out, body, usage.prompt, usage.completion, usage.reasoning);
};

/** A non-streaming answer: collected up to its cap, shaped by its API, sent in one write. */
export class PlainAnswer implements RelayAnswer {
  /** The relay it writes for (RelayAnswer.attach). */
  relay!: Relay;
  private chunks: Buffer[] = [];
  private bytes = 0;

  constructor(private readonly shape: PlainShape = chatShape) {}

  attach(relay: Relay): void {
    this.relay = relay;
  }

  start(headers: IncomingHttpHeaders): void {
    if (contentLength(headers) > this.relay.c.limits.maxAnswerBytes) this.tooLarge();
  }

  data(chunk: Buffer): void {
    if (this.bytes < 0) return;
    this.bytes += chunk.length;
    if (this.bytes > this.relay.c.limits.maxAnswerBytes) this.tooLarge();
    else this.chunks.push(chunk);
  }

  private tooLarge(): void {
    this.bytes = -1;
    this.chunks = [];
    this.relay.refuse(limitErrors.answerTooLarge(this.relay.c.limits.maxAnswerBytes), 'answer over the cap');
  }

  end(): void {
    if (this.bytes < 0) return;
    const raw = this.chunks.length === 1 ? (this.chunks[0] as Buffer) : Buffer.concat(this.chunks);
    this.chunks = [];
    const text = raw.toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = null;
    }
    this.shape(raw, text, parsed, this);
  }

  /** The model server's answer is not the route's kind (`what`): its failure, and the client told so. */
  notAnAnswer(what: string): void {
    this.relay.upstreamFailed('upstream_error');
    this.failed(
      obError('upstream_error', {
        message: `The model server sent an answer that is not ${what}. Check the instance's endpoint.`,
      }),
    );
  }

  /** The answer is nested deeper than it can be encoded again: the model server's failure. */
  tooDeep(): void {
    this.relay.upstreamFailed('upstream_error');
    this.failed(limitErrors.tooDeep(false));
  }

  /** Sends `out` (the answer with our id) and ends the exchange with the counts read from `body`. */
  send(
    out: Buffer | string,
    body: Record<string, unknown>,
    prompt: number | null,
    completion: number | null,
    reasoning: number,
  ): void {
    this.relay.c.trace?.answer(body);
    this.write(out, prompt, completion, reasoning);
  }

  /** Sends `out` as the answer, told to no trace, and ends the exchange with these counts. */
  write(out: Buffer | string, prompt: number | null, completion: number | null, reasoning: number): void {
    const c = this.relay.c;
    c.res.writeHead(200, jsonHeaders(Buffer.byteLength(out), c.reqId, c.headers));
    c.res.end(out);
    this.relay.finish(prompt, completion, reasoning);
  }

  gone(): void {
    this.relay.finish(null, null, 0);
  }

  failed(err: ObProxyError): void {
    const r = this.relay;
    r.errored = true;
    r.c.trace?.error(err.code);
    writeRawError(r.c.res, err, r.c.reqId, answerHeaders(err, r.c.headers));
    r.finish(null, null, 0);
  }

  drainEnded(): void {}
}
