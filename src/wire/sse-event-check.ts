import { type ObProxyError, obError } from '../errors.js';
import { encodeJson, reasoningCount, tokenCount } from './chat-response.js';
import { redactToken } from './upstream-token-redaction.js';
import { mayRepeatId } from './completion-splice.js';
import { sseFields } from './sse-frames.js';

/**
 * A usage chunk's `usage` as the model server sent it: nothing in it is checked here, so each
 * count is `unknown` until tokenCount (chat-response.ts) has made it a token count.
 */
export interface StreamUsage {
  prompt_tokens?: unknown;
  completion_tokens?: unknown;
  total_tokens?: unknown;
  /** Where reported (OpenAI's API): `reasoning_tokens`, part of completion_tokens. */
  completion_tokens_details?: unknown;
}

/** Why a stream was refused: what its relay tells the client (answer-limits.ts). */
export type InvalidReason = 'not_json' | 'not_sse' | 'frame_too_large' | 'too_deep';

/**
 * The chat stream's event checker: what one event means (a chunk, the usage chunk, `[DONE]`, an
 * error event, or something that is not OpenAI's stream) and what the client receives for it,
 * each decoded, checked and encoded again. The slow path of the relay (sse-relay.ts), which
 * forwards events of a known layout as bytes, and learns a layout from an event forwarded here
 * with only its id changed (`learnable`).
 */
export abstract class SseEventCheck {
  /** The slow path just forwarded a data event with only its id changed: its layout can be learned. */
  protected learnable = false;
  done = false;
  usage: StreamUsage | null = null;
  contentChunks = 0;
  /** Events that took the slow path (decoded, checked, encoded again); for tests and profiles. */
  slowEvents = 0;
  /** The upstream sent an error event: it was forwarded, and the relay stops (one error event). */
  sawError = false;
  /** The upstream sent something that is not forwarded (see `invalidReason`), and the relay stopped. */
  invalid = false;
  invalidReason: InvalidReason | null = null;

  /** `id`: ours, for every event; `upstreamToken` never leaves in an error event (upstream-token-redaction.ts). */
  constructor(
    protected readonly id: string,
    private readonly forwardUsage: boolean,
    private readonly upstreamToken: string | undefined,
  ) {}

  /** The usage chunk's counts where they are token counts (tokenCount). */
  counts(): { prompt: number | null; completion: number | null; reasoning: number } {
    const u = this.usage;
    return {
      prompt: tokenCount(u?.prompt_tokens),
      completion: tokenCount(u?.completion_tokens),
      reasoning: reasoningCount(u) ?? 0,
    };
  }

  /** Our error event, the client's last: OpenAI's envelope as a data event, and no [DONE]. */
  closingError(err: ObProxyError): string {
    return `data: ${JSON.stringify(err.toBody())}\n\n`;
  }

  /** The relay forwards nothing more: `[DONE]`, an error event, or something refused. */
  get stopped(): boolean {
    return this.done || this.invalid || this.sawError;
  }

  /** Stops the relay for `reason`; returns a position past any buffer, for the frame scan. */
  protected refuse(reason: InvalidReason): number {
    this.invalid = true;
    this.invalidReason ??= reason;
    return Number.MAX_SAFE_INTEGER;
  }

  /**
   * The slow path's policy: only `data:` events reach the client, one line each, as in OpenAI's
   * wire format. Comments and the `id:` and `retry:` fields are dropped, `event: message` is an
   * ordinary event and `event: error` an error event; any other event name or line is not
   * OpenAI's stream (an HTML page, bytes that are not SSE), so the relay stops there.
   */
  protected frame(frame: string): string {
    if (frame.startsWith('data:') && !frame.includes('\n')) {
      const data = frame.slice(frame.charCodeAt(5) === 32 ? 6 : 5);
      return this.data(data.endsWith('\r') ? data.slice(0, -1) : data, true);
    }
    const fields = sseFields(frame);
    if (fields === null) return this.reject('not_sse');
    if (fields.data === null) return '';
    if (fields.event === 'error') return this.namedError(fields.data);
    if (fields.event !== '' && fields.event !== 'message') return this.reject('not_sse');
    let data = fields.data;
    if (data.includes('\n')) {
      // Data lines joined: sent on one line again, or the client would get a broken event.
      const parsed = this.parse(data);
      if (parsed === null) return this.reject('not_json');
      const one = this.encode(parsed);
      if (one === null) return '';
      data = one;
    }
    return this.data(data, false);
  }

  /**
   * A data event's payload; `single`: the frame was that one line, so its layout may be learned.
   * The event is parsed and judged by what it holds, never by how its text looks: a server may
   * write `"usage": {` with a space (Python's json.dumps) or a key with escapes, and a usage
   * chunk told by its text was then forwarded to clients that had not asked for it, uncounted.
   */
  private data(data: string, single: boolean): string {
    if (data === '[DONE]') {
      this.done = true;
      return 'data: [DONE]\n\n';
    }
    let value: unknown;
    try {
      value = JSON.parse(data);
    } catch {
      // A broken event would make the client's SDK throw a parse error.
      return this.reject('not_json');
    }
    // A chunk is an object; a bare string or number is not OpenAI's stream.
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return this.reject('not_sse');
    const event = value as Record<string, unknown>;
    // What the client's SDK takes for an error (openai-node: `if (data.error)`): the stream's last event.
    if (isError(event.error)) return this.errorEvent(event);
    const usage = event.usage;
    if (typeof usage === 'object' && usage !== null) {
      this.usage = usage as StreamUsage;
      const choices = event.choices;
      const usageOnly = Array.isArray(choices) && choices.length === 0;
      if (!usageOnly) this.contentChunks++;
      if (this.forwardUsage) return this.withOurId(data, spliceable(data), event);
      if (usageOnly) return '';
      delete event.usage;
      event.id = this.id;
      const rest = this.encode(event);
      return rest === null ? '' : `data: ${rest}\n\n`;
    }
    this.contentChunks++;
    const idLen = spliceable(data);
    // Only an event sent as its own bytes with our id spliced in is a layout the fast path may copy.
    this.learnable = single && idLen !== -1;
    return this.withOurId(data, idLen, event);
  }

  /**
   * `event: error`: one error event, the server's when its data holds an `error`, otherwise ours
   * with the server's message and string code (as for an error status, upstream-errors.ts).
   */
  private namedError(data: string): string {
    const parsed = this.parse(data);
    if (parsed === null) return this.reject('not_json');
    if (isError(parsed.error)) return this.errorEvent(parsed);
    const { message, code } = parsed;
    return this.ourErrorEvent(
      typeof message === 'string' && message !== '' ? message : 'an error event without a message',
      typeof code === 'string' && code !== '' ? code : 'upstream_error',
    );
  }

  /**
   * An upstream error event, the client's last, as our error event: the server's message and its
   * code when that is a string (else `upstream_error`), in the one error shape every answer of
   * ours has. llama-server's `{"error":{"code":500,…}}` would otherwise reach the client with a
   * number where the OpenAI shape has a string, and a server's other fields (its upstream token
   * among them) never reach it.
   */
  private errorEvent(event: Record<string, unknown>): string {
    const error = event.error;
    let message: unknown = error;
    let code: unknown;
    if (typeof error === 'object' && error !== null) {
      message = (error as Record<string, unknown>).message;
      code = (error as Record<string, unknown>).code;
    }
    return this.ourErrorEvent(
      typeof message === 'string' && message !== '' ? message : 'an error event without a message',
      typeof code === 'string' && code !== '' ? code : 'upstream_error',
    );
  }

  /** Our error event with the server's message (its upstream token cleared) and string code. */
  private ourErrorEvent(message: string, code: string): string {
    this.sawError = true;
    const token = this.upstreamToken;
    const err = obError('upstream_error', {
      message: `Model server error: ${redactToken(message, token)}`,
      wireCode: redactToken(code, token),
    });
    return `data: ${JSON.stringify(err.toBody())}\n\n`;
  }

  private reject(reason: InvalidReason): string {
    this.refuse(reason);
    return '';
  }

  private parse(data: string): Record<string, unknown> | null {
    try {
      const v: unknown = JSON.parse(data);
      return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
    } catch {
      return null;
    }
  }

  /** The event with our id: spliced in when `idLen` (`spliceable`) allows, else `event` encoded again. */
  private withOurId(data: string, idLen: number, event: Record<string, unknown>): string {
    if (idLen !== -1) return `data: {"id":"${this.id}${data.slice(7 + idLen)}\n\n`;
    event.id = this.id;
    const text = this.encode(event);
    return text === null ? '' : `data: ${text}\n\n`;
  }

  /**
   * `v` encoded again, or null (and the relay stops) where it nests too deeply for the encoder:
   * JSON.parse takes any depth, JSON.stringify overflows the stack at a few thousand levels. Its
   * RangeError, thrown inside undici's callback, ended the stream as `upstream_unavailable`, as
   * if the model server could not be reached (and an error event, already marked seen, left the
   * client's stream open).
   */
  private encode(v: unknown): string | null {
    const text = encodeJson(v);
    if (text === null) this.refuse('too_deep');
    return text;
  }
}

/**
 * The length of the id's text when our id can be spliced into `data`: the id is its first key
 * (every server we face), has no escapes, and is its only `id`; else -1. Not when `data` holds a
 * raw CR, which JSON allows only as whitespace: SSE clients end a line there and would get half
 * an event, so the event is encoded again, without it.
 */
function spliceable(data: string): number {
  if (!data.startsWith('{"id":"') || data.includes('\r')) return -1;
  const end = data.indexOf('"', 7);
  if (end === -1 || data.lastIndexOf('\\', end) >= 7) return -1;
  return mayRepeatId(data, end) && !splicedIdWins(data.slice(end)) ? -1 : end - 7;
}

/**
 * Whether an id spliced before `rest` (the event's text after its first id) is the id its parse
 * gives. Most events that `mayRepeatId` flags hold a tool call's id, nested, which is no
 * repeat: those are spliced still (their bytes as sent), the rare true repeat is encoded again.
 */
function splicedIdWins(rest: string): boolean {
  try {
    return (JSON.parse(`{"id":"x${rest}`) as { id?: unknown }).id === 'x';
  } catch {
    return false;
  }
}

/** An `error` member the client's SDK throws on: any truthy value. */
function isError(error: unknown): boolean {
  return error !== undefined && error !== null && error !== false && error !== 0 && error !== '';
}
