import type { ObProxyError } from '../../errors.js';
import { tokenCount } from '../../wire/chat-response.js';
import { OutputBatch } from '../../wire/output-batch.js';
import type { InvalidReason } from '../../wire/sse-relay.js';
import { redactTokenInJson } from '../../wire/upstream-token-redaction.js';

type Json = Record<string, unknown>;

const LF = 10;

/**
 * Turns Ollama's native stream (`/api/chat`, `/api/generate`: NDJSON, one JSON object a line) into
 * what the client receives, as it arrives (docs/contract.md §3b). Each line goes on as its bytes
 * came: Ollama's answers hold no id to replace. Every line is parsed, so the client never gets a
 * broken one: a line that is not a JSON object, or one of `maxLineBytes` or more unfinished,
 * stops the relay (`invalid`). The line with `"done": true` ends it (`done`) and carries the usage
 * (`prompt_eval_count`, `eval_count`); a line with an `error` (Ollama's failure after its 200) is
 * passed on, its upstream token cleared, and ends it too (`sawError`). Blank lines are dropped.
 * A last line without its newline (Ollama writes a model-load answer as one bare JSON object) is
 * taken at the end of the body (`end`).
 */
export class NdjsonRelay {
  done = false;
  sawError = false;
  invalid = false;
  invalidReason: InvalidReason | null = null;
  /** Lines with text before the last: the completion when no count comes. */
  contentChunks = 0;
  private prompt: number | null = null;
  private completion: number | null = null;
  /** The reads holding the start of a line whose newline has not come yet. */
  private held: Buffer[] = [];
  private heldBytes = 0;

  constructor(
    private readonly maxLineBytes = 1024 * 1024,
    private readonly upstreamToken?: string,
  ) {}

  get stopped(): boolean {
    return this.done || this.invalid || this.sawError;
  }

  counts(): { prompt: number | null; completion: number | null; reasoning: number } {
    return { prompt: this.prompt, completion: this.completion, reasoning: 0 };
  }

  /** The text to write now; for tests. */
  push(chunk: Buffer): string {
    const out = new OutputBatch();
    this.pushInto(chunk, out);
    return out.length === 0 ? '' : out.take().toString('utf8');
  }

  pushInto(chunk: Buffer, out: OutputBatch): void {
    let start = 0;
    while (!this.stopped) {
      const nl = chunk.indexOf(LF, start);
      if (nl < 0) {
        this.hold(chunk, start);
        return;
      }
      this.line(chunk, start, nl + 1, out);
      start = nl + 1;
    }
  }

  /** The body ended: a line left without its newline is the last one. */
  end(out: OutputBatch): void {
    if (this.stopped || this.heldBytes === 0) return;
    const empty = Buffer.alloc(0);
    this.line(empty, 0, 0, out);
  }

  /** Our own error, the client's last line, in Ollama's shape: `{"error":"…","code":"…"}`. */
  closingError(err: ObProxyError): string {
    return `${JSON.stringify(err.toOllamaBody())}\n`;
  }

  private hold(chunk: Buffer, start: number): void {
    if (start >= chunk.length) return;
    this.heldBytes += chunk.length - start;
    if (this.heldBytes >= this.maxLineBytes) {
      this.refuse('frame_too_large');
      return;
    }
    this.held.push(start === 0 ? chunk : chunk.subarray(start));
  }

  private refuse(reason: InvalidReason): void {
    this.invalid = true;
    this.invalidReason ??= reason;
    this.held = [];
    this.heldBytes = 0;
  }

  /** The line made of what is held and `chunk[start, end)` (its newline included, when it has one). */
  private line(chunk: Buffer, start: number, end: number, out: OutputBatch): void {
    const held = this.held;
    if (this.heldBytes + end - start > this.maxLineBytes) {
      this.refuse('frame_too_large');
      return;
    }
    const text =
      held.length === 0
        ? chunk.toString('utf8', start, end)
        : Buffer.concat([...held, chunk.subarray(start, end)]).toString('utf8');
    if (text.trim() === '') {
      this.held = [];
      this.heldBytes = 0;
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      this.refuse('not_json');
      return;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      this.refuse('not_json');
      return;
    }
    const v = value as Json;
    // Ollama's clients raise on a line that has an `error` at all (ollama-js: `"error" in message`).
    if (Object.hasOwn(v, 'error')) {
      this.passError(text, out);
      return;
    }
    for (const piece of held) out.add(null, piece, 0, piece.length);
    out.add(null, chunk, start, end);
    this.held = [];
    this.heldBytes = 0;
    if (v.done === true) {
      this.done = true;
      this.prompt = tokenCount(v.prompt_eval_count);
      this.completion = tokenCount(v.eval_count);
    } else this.contentChunks++;
  }

  /** The server's error line, its last, with the upstream token cleared (ours instead when it cannot be). */
  private passError(text: string, out: OutputBatch): void {
    this.sawError = true;
    this.held = [];
    this.heldBytes = 0;
    const token = this.upstreamToken;
    let sent: string | null = text.trimEnd();
    if (token !== undefined) sent = redactTokenInJson(sent, token);
    sent ??= JSON.stringify({ error: 'Model server error: an error that could not be passed on as sent.' });
    const line = Buffer.from(`${sent}\n`, 'utf8');
    out.add(null, line, 0, line.length);
  }
}
