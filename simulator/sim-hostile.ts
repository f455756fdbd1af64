/**
 * The hostile model server's answers: lines, bodies and error bodies without end or of any size,
 * statuses that are neither 200 nor an error, a body that goes on after `[DONE]`, error events
 * and SSE that is not OpenAI's wire format. A proxy must bound, refuse or drop each of them
 * (docs/contract.md §3, docs/reliability.md); the tests pair each with a healthy neighbour.
 * Everything is written with back-pressure, so an endless answer costs the simulator nothing
 * while nobody reads it, and stops as soon as the proxy closes the connection.
 */
import type { Job, SimChatRequest } from './sim-job.js';
import {
  completionBody,
  completionId,
  contentOf,
  countPromptTokens,
  DONE_FRAME,
  errorBody,
  nowSeconds,
  runnerErrorMessage,
  StreamFrames,
  tokenText,
} from './sim-responses.js';
import { HOSTILE_FAIL_MODES, type FailMode, type Knobs } from './sim-types.js';

const SSE = { 'Content-Type': 'text/event-stream' };
const JSON_CT = { 'Content-Type': 'application/json' };
const PIECE = 64 * 1024;
const FILLER = Buffer.alloc(PIECE, 'a');

export const HOSTILE_MODES: ReadonlySet<FailMode> = new Set<FailMode>(HOSTILE_FAIL_MODES);

/** An HTML page with blank lines, so an SSE reader finds "events" in it. */
export const HTML_PAGE =
  '<!DOCTYPE html>\n<html>\n\n<head><title>Welcome to nginx!</title></head>\n\n<body>\n<h1>It works</h1>\n</body>\n\n</html>\n\n';

/**
 * Writes `head`, then what `next` gives until it gives null (then ends the response), pausing
 * while the socket is full; stops when the response closes.
 */
function pump(job: Job, head: string | Buffer, next: () => Buffer | string | null): void {
  const { res } = job;
  const step = (): void => {
    while (!job.done) {
      const piece = next();
      if (piece === null) {
        res.end();
        return;
      }
      if (!res.write(piece)) {
        res.once('drain', step);
        return;
      }
    }
  };
  if (res.write(head)) step();
  else res.once('drain', step);
}

/** `total` bytes of filler, in pieces, then null. */
function filler(total: number, tail: string): () => Buffer | string | null {
  let left = total;
  let tailSent = false;
  return () => {
    if (left > 0) {
      const n = Math.min(left, PIECE);
      left -= n;
      return n === PIECE ? FILLER : FILLER.subarray(0, n);
    }
    if (tailSent) return null;
    tailSent = true;
    return tail;
  };
}

function streamBody(frames: StreamFrames, req: SimChatRequest, k: Readonly<Knobs>): string {
  const n = req.maxTokens !== null ? Math.min(req.maxTokens, k.chunks) : k.chunks;
  let s = '';
  for (let i = 0; i < n; i++) s += i === 0 ? frames.first(tokenText(0)) : frames.content(tokenText(i));
  s += frames.finish('stop');
  if (req.includeUsage) s += frames.usage(countPromptTokens(req.messages), n);
  return s + DONE_FRAME;
}

function plainBody(req: SimChatRequest, k: Readonly<Knobs>): string {
  return completionBody({
    id: completionId(),
    created: nowSeconds(),
    model: req.model,
    content: contentOf(k.chunks),
    finishReason: 'stop',
    promptTokens: countPromptTokens(req.messages),
    completionTokens: k.chunks,
  });
}

/** The first chunks of a stream (failAfterChunks of them). */
function someChunks(frames: StreamFrames, k: Readonly<Knobs>): string {
  let s = '';
  for (let i = 0; i < Math.min(k.failAfterChunks, k.chunks); i++)
    s += i === 0 ? frames.first(tokenText(0)) : frames.content(tokenText(i));
  return s;
}

/** Answers with the hostile mode `k.fail`. */
export function hostile(job: Job, req: SimChatRequest, k: Readonly<Knobs>, changed: () => void): void {
  const { res } = job;
  const frames = new StreamFrames(completionId(), nowSeconds(), req.model);
  // The first event up to its content string: `data: {…"delta":{"role":"assistant","content":`.
  const open = frames.first('').slice(0, -'""},"finish_reason":null}]}\n\n'.length);
  switch (k.fail) {
    case 'endless-line':
      // One event that never ends: its content string grows for ever, no newline ever comes.
      res.writeHead(200, req.stream ? SSE : JSON_CT);
      pump(
        job,
        req.stream
          ? `${open}"`
          : `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`,
        () => FILLER,
      );
      return;
    case 'endless-body': {
      // Well-formed events for ever (streaming), or a plain answer that never ends.
      res.writeHead(200, req.stream ? SSE : JSON_CT);
      if (!req.stream) {
        pump(
          job,
          '{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"',
          () => FILLER,
        );
        return;
      }
      let i = 0;
      if (k.tokensPerSecond > 0) {
        // Paced: one event per interval, for ever.
        res.write(frames.first(tokenText(0)));
        const tick = (): void => {
          job.timer = null;
          if (job.done) return;
          res.write(frames.content(tokenText(++i)));
          job.record.chunksSent = i;
          job.timer = setTimeout(tick, 1000 / k.tokensPerSecond);
        };
        job.timer = setTimeout(tick, 1000 / k.tokensPerSecond);
        return;
      }
      pump(job, frames.first(tokenText(0)), () => {
        let s = '';
        for (let j = 0; j < 256; j++) s += frames.content(tokenText(++i));
        job.record.chunksSent = i;
        return s;
      });
      return;
    }
    case 'huge-body': {
      // A well-formed answer (or one event) of bodyBytes bytes.
      const head = req.stream
        ? `${open}"`
        : `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":${JSON.stringify(req.model)},"choices":[{"index":0,"message":{"role":"assistant","content":"`;
      const tail = req.stream
        ? `"},"finish_reason":null}]}\n\n${frames.finish('stop')}${DONE_FRAME}`
        : '"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}\n';
      res.writeHead(200, {
        ...(req.stream ? SSE : JSON_CT),
        ...(req.stream ? {} : { 'Content-Length': Buffer.byteLength(head) + k.bodyBytes + Buffer.byteLength(tail) }),
      });
      pump(job, head, filler(k.bodyBytes, tail));
      return;
    }
    case 'huge-error': {
      const head = '{"error":{"message":"';
      const tail = '","type":"api_error","param":null,"code":null}}\n';
      res.writeHead(k.errorStatus, { ...JSON_CT, 'Content-Length': head.length + k.bodyBytes + tail.length });
      pump(job, head, filler(k.bodyBytes, tail));
      return;
    }
    case 'bad-status':
      // A well-formed answer under another status, its body left open so that only the proxy's
      // abort ends the request (204 and 304 have no body: Node ends them).
      res.writeHead(k.status, req.stream ? SSE : JSON_CT);
      if (k.status === 204 || k.status === 304) res.end();
      else res.write(req.stream ? streamBody(frames, req, k) : plainBody(req, k));
      return;
    case 'hang-after-done':
      // The whole answer, then the body is never ended.
      res.writeHead(200, req.stream ? SSE : JSON_CT);
      res.write(req.stream ? streamBody(frames, req, k) : plainBody(req, k));
      job.record.chunksSent = k.chunks;
      changed();
      return;
    case 'error-event':
      // Ollama's mid-stream failure: an error event, then the end of the body.
      res.writeHead(200, SSE);
      res.end(`${someChunks(frames, k)}data: ${errorBody(500, runnerErrorMessage(500)).trimEnd()}\n\n`);
      return;
    case 'broken-error-event':
      res.writeHead(200, SSE);
      res.end(`${someChunks(frames, k)}data: {"error" <not json>\n\n${DONE_FRAME}`);
      return;
    case 'named-error-event':
      res.writeHead(200, SSE);
      res.end(`${someChunks(frames, k)}event: error\ndata: {"message":"boom","code":"overloaded"}\n\n`);
      return;
    case 'sse-fields': {
      // Valid SSE that OpenAI's wire format never has: comments, retry, ids, `event: message`.
      res.writeHead(200, SSE);
      let s = ': keep-alive\n\nretry: 3000\n\n';
      const body = streamBody(frames, req, k)
        .split('\n\n')
        .filter((f) => f !== '');
      body.forEach((f, i) => {
        s += i % 2 === 0 ? `id: ${i}\nevent: message\n${f}\n\n` : `: tick ${i}\n${f}\r\n\r\n`;
      });
      res.end(s);
      return;
    }
    case 'named-event':
      res.writeHead(200, SSE);
      res.end(`${someChunks(frames, k)}event: telemetry\ndata: {"gpu":0.93}\n\n${frames.finish('stop')}${DONE_FRAME}`);
      return;
    case 'html-frames':
      res.writeHead(200, SSE);
      res.end(HTML_PAGE);
      return;
    default:
      throw new Error(`not a hostile mode: ${k.fail}`);
  }
}
