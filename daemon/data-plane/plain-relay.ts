import type { IncomingHttpHeaders } from 'node:http';
import { type ObProxyError, obError } from '../../src/errors.js';
import { encodeJson, normalizeCompletion, usageOf } from '../../src/wire/chat-response.js';
import { spliceCompletionId } from '../../src/wire/completion-splice.js';
import { limitErrors } from '../../src/upstream/answer-limits.js';
import { Relay, answerHeaders, contentLength } from './upstream-relay.js';
import { jsonHeaders, writeRawError } from './send-error.js';

/** A non-streaming answer: collected, given our id and the shape of docs/contract.md §3.3, sent in one write. */
export class PlainRelay extends Relay {
  private chunks: Buffer[] = [];
  private bytes = 0;

  protected start(headers: IncomingHttpHeaders): void {
    if (contentLength(headers) > this.c.limits.maxAnswerBytes) this.tooLarge();
  }

  protected data(chunk: Buffer): void {
    if (this.bytes < 0) return;
    this.bytes += chunk.length;
    if (this.bytes > this.c.limits.maxAnswerBytes) this.tooLarge();
    else this.chunks.push(chunk);
  }

  private tooLarge(): void {
    this.bytes = -1;
    this.chunks = [];
    this.refuse(limitErrors.answerTooLarge(this.c.limits.maxAnswerBytes), 'answer over the cap');
  }

  protected end(): void {
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
    this.answer(raw, text, parsed);
  }

  /** Writes the answer whose bytes are `raw` (`text` decoded, `parsed` its JSON or null): chat's shape (docs/contract.md §3.3). */
  protected answer(raw: Buffer, text: string, parsed: unknown): void {
    // Parsed once, for the shape check and usage; re-serialised only when the shape needs fixing.
    let out: Buffer | string | null = spliceCompletionId(raw, text, parsed, this.c.id);
    const body =
      out !== null
        ? (parsed as Record<string, unknown>)
        : normalizeCompletion(parsed, this.c.id, this.c.model, Math.floor(this.c.clock.now() / 1000));
    if (body === null) {
      this.notAnAnswer('a chat completion');
      return;
    }
    out ??= encodeJson(body);
    if (out === null) {
      this.tooDeep();
      return;
    }
    const usage = usageOf(body);
    this.send(out, body, usage.prompt, usage.completion, usage.reasoning);
  }

  /** The model server's answer is not the route's kind (`what`): its failure, and the client told so. */
  protected notAnAnswer(what: string): void {
    this.upstreamFailed('upstream_error');
    this.failed(
      obError('upstream_error', {
        message: `The model server sent an answer that is not ${what}. Check the instance's endpoint.`,
      }),
    );
  }

  /** The answer is nested deeper than it can be encoded again: the model server's failure. */
  protected tooDeep(): void {
    this.upstreamFailed('upstream_error');
    this.failed(limitErrors.tooDeep(false));
  }

  /** Sends `out` (the answer with our id) and ends the exchange with the counts read from `body`. */
  protected send(
    out: Buffer | string,
    body: Record<string, unknown>,
    prompt: number | null,
    completion: number | null,
    reasoning: number,
  ): void {
    this.c.trace?.answer(body);
    this.c.res.writeHead(200, jsonHeaders(Buffer.byteLength(out), this.c.reqId, this.c.headers));
    this.c.res.end(out);
    this.finish(prompt, completion, reasoning);
  }

  protected gone(): void {
    this.finish(null, null, 0);
  }

  protected failed(err: ObProxyError): void {
    this.errored = true;
    this.c.trace?.error(err.code);
    writeRawError(this.c.res, err, this.c.reqId, answerHeaders(err, this.c.headers));
    this.finish(null, null, 0);
  }
}
