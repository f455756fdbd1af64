/**
 * Wire bodies of the simulated Ollama server, built as strings (the hot path of benchmarks).
 * Shapes follow Ollama ≥ 0.32.6 (Ollama's openai/openai.go and middleware/openai.go): key order as Go's encoder
 * writes them, non-streaming bodies end with the "\n" that json.Encoder appends.
 */

/** Token i (0-based) is "t{i} ", so a client can check that nothing was lost or reordered. */
export function tokenText(i: number): string {
  return `t${i} `;
}

const CONTENT_CACHE = new Map<number, string>();

/** The concatenation of tokens 0..n-1 (cached for the usual small n). */
export function contentOf(n: number): string {
  const hit = CONTENT_CACHE.get(n);
  if (hit !== undefined) return hit;
  let s = '';
  for (let i = 0; i < n; i++) s += tokenText(i);
  if (n <= 4096) CONTENT_CACHE.set(n, s);
  return s;
}

/** Ollama's id: `chatcmpl-` + a random integer 0–998 (it collides, on purpose). */
export function completionId(): string {
  return `chatcmpl-${Math.floor(Math.random() * 999)}`;
}

export function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

export function errorType(status: number): string {
  if (status === 400) return 'invalid_request_error';
  if (status === 404) return 'not_found_error';
  return 'api_error';
}

/** Ollama's OpenAI error envelope (O-compat NewError), with the encoder's trailing newline. */
export function errorBody(status: number, message: string): string {
  return `${JSON.stringify({ error: { message, type: errorType(status), param: null, code: null } })}\n`;
}

/**
 * The same envelope as gin's c.JSON writes it (Ollama's middleware refusals): no trailing
 * newline, and `<`, `>` and `&` escaped as Go's encoder does for HTML.
 */
export function ginErrorBody(status: number, message: string): string {
  const body = JSON.stringify({ error: { message, type: errorType(status), param: null, code: null } });
  return body.replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`);
}

/** The message Ollama gives for a failing runner with this status. */
export function runnerErrorMessage(status: number): string {
  if (status === 503) return 'server busy, please try again.  maximum pending requests exceeded';
  if (status === 404) return 'model not found, try pulling it first';
  return 'model runner has unexpectedly stopped, this may be due to resource limitations or an internal error';
}

function usageJson(promptTokens: number, completionTokens: number): string {
  return `{"prompt_tokens":${promptTokens},"completion_tokens":${completionTokens},"total_tokens":${promptTokens + completionTokens}}`;
}

export interface CompletionParts {
  id: string;
  created: number;
  model: string;
  content: string;
  finishReason: string | null;
  promptTokens: number;
  completionTokens: number;
}

/** A non-streaming `chat.completion` body. */
export function completionBody(p: CompletionParts): string {
  return (
    `{"id":"${p.id}","object":"chat.completion","created":${p.created},"model":${JSON.stringify(p.model)},` +
    `"system_fingerprint":"fp_ollama","choices":[{"index":0,"message":{"role":"assistant","content":${JSON.stringify(p.content)}},` +
    `"finish_reason":${p.finishReason === null ? 'null' : JSON.stringify(p.finishReason)}}],` +
    `"usage":${usageJson(p.promptTokens, p.completionTokens)}}\n`
  );
}

export const DONE_FRAME = 'data: [DONE]\n\n';

/** SSE frames of one stream: same id, created and model on every chunk. */
export class StreamFrames {
  private readonly head: string;

  constructor(id: string, created: number, model: string) {
    this.head =
      `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":${JSON.stringify(model)},` +
      '"system_fingerprint":"fp_ollama","choices":';
  }

  /** The first chunk: role and content (content may be ""). */
  first(content: string): string {
    return `${this.head}[{"index":0,"delta":{"role":"assistant","content":${JSON.stringify(content)}},"finish_reason":null}]}\n\n`;
  }

  content(content: string): string {
    return `${this.head}[{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}]}\n\n`;
  }

  finish(reason: string): string {
    return `${this.head}[{"index":0,"delta":{},"finish_reason":${JSON.stringify(reason)}}]}\n\n`;
  }

  usage(promptTokens: number, completionTokens: number): string {
    return `${this.head}[],"usage":${usageJson(promptTokens, completionTokens)}}\n\n`;
  }

  /** A frame whose data is cut off mid-object (invalid JSON). */
  invalid(): string {
    return `${this.head}[{"index":0,"delta":{"cont\n\n`;
  }
}

export const HTML_500 =
  '<html>\r\n<head><title>500 Internal Server Error</title></head>\r\n<body>\r\n' +
  '<center><h1>500 Internal Server Error</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n';

/** Bytes that are neither SSE nor JSON. */
export const GARBAGE = Buffer.concat([
  Buffer.from([0x00, 0xff, 0xfe, 0x1b, 0x5b]),
  Buffer.from('\u0007<<garbage>> %%% not an event stream }{ \r\x0b\x0c', 'latin1'),
]);

/** A deterministic prompt-token count: whitespace-separated words of the messages' text. */
export function countPromptTokens(messages: readonly unknown[]): number {
  let count = 0;
  for (const m of messages) {
    const content = (m as { content?: unknown } | null)?.content;
    if (typeof content === 'string') count += countWords(content);
    else if (Array.isArray(content)) {
      for (const part of content) {
        const t = (part as { text?: unknown } | null)?.text;
        if (typeof t === 'string') count += countWords(t);
      }
    }
  }
  return count;
}

function countWords(s: string): number {
  let n = 0;
  let inWord = false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const space = c === 32 || (c >= 9 && c <= 13);
    if (!space && !inWord) n++;
    inWord = !space;
  }
  return n;
}
