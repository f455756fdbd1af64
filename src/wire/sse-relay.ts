import { StringDecoder } from 'node:string_decoder';

export interface StreamUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens?: number;
}

/**
 * Turns the model server's SSE bytes into what the client receives, frame by frame, as they
 * arrive: every chunk's `id` becomes ours (one per stream), the usage chunk is kept for
 * accounting and forwarded only when the client asked for it, and `[DONE]` ends the relay.
 * Bytes are split on frame boundaries only, so a multi-byte character or a frame cut across
 * TCP reads is never corrupted.
 */
export class SseRelay {
  private readonly decoder = new StringDecoder('utf8');
  private buffer = '';
  done = false;
  usage: StreamUsage | null = null;
  contentChunks = 0;
  /** The upstream sent an error event inside the stream. */
  sawError = false;
  /** The upstream sent a data event that is not JSON: it is not forwarded, and the relay stops. */
  invalid = false;

  constructor(private readonly id: string, private readonly forwardUsage: boolean) {}

  /** Returns the text to write to the client now (possibly empty). */
  push(chunk: Buffer): string {
    this.buffer += this.decoder.write(chunk);
    let out = '';
    for (;;) {
      const end = this.frameEnd();
      if (end === null) break;
      const frame = this.buffer.slice(0, end.at);
      this.buffer = this.buffer.slice(end.at + end.len);
      out += this.frame(frame);
      if (this.done || this.invalid) break;
    }
    return out;
  }

  private frameEnd(): { at: number; len: number } | null {
    const lf = this.buffer.indexOf('\n\n');
    const crlf = this.buffer.indexOf('\r\n\r\n');
    if (lf === -1 && crlf === -1) return null;
    if (crlf !== -1 && (lf === -1 || crlf < lf)) return { at: crlf, len: 4 };
    return { at: lf, len: 2 };
  }

  private frame(frame: string): string {
    if (!frame.startsWith('data:')) return frame.trim() === '' ? '' : `${frame}\n\n`;
    const data = frame.slice(frame.charCodeAt(5) === 32 ? 6 : 5);
    if (data === '[DONE]') {
      this.done = true;
      return 'data: [DONE]\n\n';
    }
    if (data.startsWith('{"error"') || data.startsWith('{ "error"')) {
      this.sawError = true;
      return `data: ${data}\n\n`;
    }
    if (data.includes('"usage":{')) {
      const parsed = this.parse(data);
      if (parsed === null) return this.reject();
      const usage = parsed.usage as StreamUsage | undefined;
      if (usage !== undefined) this.usage = usage;
      const choices = parsed.choices;
      if (Array.isArray(choices) && choices.length === 0) {
        if (!this.forwardUsage) return '';
        parsed.id = this.id;
        return `data: ${JSON.stringify(parsed)}\n\n`;
      }
      if (!this.forwardUsage) delete parsed.usage;
      parsed.id = this.id;
      this.contentChunks++;
      return `data: ${JSON.stringify(parsed)}\n\n`;
    }
    // A broken event would make the client's SDK throw a parse error: check before forwarding.
    if (!isJson(data)) return this.reject();
    this.contentChunks++;
    return `data: ${this.rewriteId(data)}\n\n`;
  }

  private reject(): string {
    this.invalid = true;
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

  /** Replaces the first `"id":"…"` (the chunk's own id comes first in every server we face). */
  private rewriteId(data: string): string {
    const at = data.indexOf('"id":"');
    if (at === -1 || at > 16) {
      const parsed = this.parse(data);
      if (parsed === null) return data;
      parsed.id = this.id;
      return JSON.stringify(parsed);
    }
    const start = at + 6;
    const end = data.indexOf('"', start);
    if (end === -1) return data;
    return data.slice(0, start) + this.id + data.slice(end);
  }
}

function isJson(data: string): boolean {
  try {
    JSON.parse(data);
    return true;
  } catch {
    return false;
  }
}
