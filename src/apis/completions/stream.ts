import { SseRelay } from '../../wire/sse-relay.js';

/**
 * A legacy completions stream: relayed as chat's is (sse-relay.ts: `data:` events with our id,
 * the usage chunk only for a client that asked, `[DONE]` as the server sends it). One difference
 * in what is counted: asked for its usage, Ollama puts a zero usage on every chunk and the real
 * one on a last `choices: []` chunk, so a stream cut before that chunk holds zeros, which are no
 * report: they are taken as none, and the key is charged by estimate (accounting.ts).
 */
export class CompletionsStreamRelay extends SseRelay {
  override counts(): { prompt: number | null; completion: number | null; reasoning: number } {
    const c = super.counts();
    if (c.prompt === 0 && c.completion === 0 && this.contentChunks > 0)
      return { prompt: null, completion: null, reasoning: 0 };
    return c;
  }
}
