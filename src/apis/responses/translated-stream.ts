import { ObProxyError, obError } from '../../errors.js';
import { reasoningCount, tokenCount } from '../../wire/chat-response.js';
import type { OutputBatch } from '../../wire/output-batch.js';
import type { ResponseContext } from './object.js';
import { ResponsesStreamTranslator } from './stream.js';
import { type ResponsesEvent, eventFrame } from './stream-items.js';
import { SseDataReader } from '../../wire/sse-data-reader.js';
import type { InvalidReason } from '../../wire/sse-relay.js';

/**
 * A model server's chat completions stream, turned as it arrives into the Responses event
 * stream a client asked for (`POST /v1/responses` where the model server serves only chat): the
 * chat stream's data read with SseDataReader, each chunk through the ResponsesStreamTranslator,
 * its events written at once. `[DONE]` closes the answer (response.completed or
 * response.incomplete, with the usage the chat stream reported); nothing follows, and no
 * `[DONE]` is sent, as a Responses stream has none.
 *
 * What a hostile model server can do is bounded as on a relayed stream: a frame of
 * `maxFrameBytes` or more, or data that is not JSON, stops it (`invalid`, with the reason the
 * relay answers); an error chunk, or more tool calls than an answer may hold, ends it with one
 * Responses `error` event (`sawError`). The translation holds the answer's text (the `.done`
 * events and response.completed repeat it), so that text is bounded as a plain answer is: past
 * `maxTextBytes` the stream ends with one error event. Every error event takes the next
 * `sequence_number`.
 */
export class TranslatedResponsesStream {
  private readonly reader: SseDataReader;
  private readonly translator: ResponsesStreamTranslator;
  done = false;
  sawError = false;
  invalid = false;
  invalidReason: InvalidReason | null = null;
  /** UTF-16 units of text held (every delta's); bounded by maxTextBytes. */
  private held = 0;

  constructor(
    ctx: ResponseContext,
    maxFrameBytes: number,
    private readonly maxTextBytes: number,
  ) {
    this.reader = new SseDataReader(maxFrameBytes);
    this.translator = new ResponsesStreamTranslator(ctx);
  }

  get stopped(): boolean {
    return this.done || this.invalid || this.sawError;
  }

  /** Chunks that carried reasoning, text, a refusal or tool-call arguments: the completion when no usage comes. */
  get contentChunks(): number {
    return this.translator.contentChunks;
  }

  /** The usage of the chat stream's usage chunk, where its counts are token counts. */
  counts(): { prompt: number | null; completion: number | null; reasoning: number } {
    const u = this.translator.usage as { prompt_tokens?: unknown; completion_tokens?: unknown } | null;
    return {
      prompt: tokenCount(u?.prompt_tokens),
      completion: tokenCount(u?.completion_tokens),
      reasoning: reasoningCount(u) ?? 0,
    };
  }

  pushInto(chunk: Buffer, out: OutputBatch): void {
    if (this.stopped) return;
    let s = '';
    try {
      const datas = this.reader.push(chunk);
      for (const d of datas) {
        if (d.done) {
          s += this.translated(this.translator.endEvents());
          this.done = true;
          break;
        }
        s += this.translated(this.translator.pushEvents(d.value));
        // The events of the chunk that took it past the bound are sent, then the error event.
        if (this.held > this.maxTextBytes)
          throw obError('upstream_error', {
            message: `The model server's answer is larger than ${this.maxTextBytes} bytes; the stream was ended.`,
          });
      }
    } catch (err) {
      if (!(err instanceof ObProxyError)) throw err;
      const refused = this.reader.refused;
      if (refused !== null) {
        this.invalid = true;
        this.invalidReason = refused;
      } else {
        this.sawError = true;
        s += this.translator.error(err.wireCode, err.message);
      }
    }
    if (s === '') return;
    const frame = Buffer.from(s, 'utf8');
    out.add(null, frame, 0, frame.length);
  }

  /** Our own error event, the client's last: the next sequence number. */
  closingError(err: ObProxyError): string {
    return this.translator.error(err.wireCode, err.message);
  }

  /** The frames of `events`, the text their deltas add counted. */
  private translated(events: ResponsesEvent[]): string {
    let s = '';
    for (const e of events) {
      const delta = e.data.delta;
      if (typeof delta === 'string') this.held += delta.length;
      s += eventFrame(e);
    }
    return s;
  }
}
