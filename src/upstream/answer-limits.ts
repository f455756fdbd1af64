import { type ObProxyError, obError } from '../errors.js';

/**
 * Bounds on a model server's answer (docs/contract.md §3): one model server that sends without end must
 * cost the gateway a bounded amount of memory and time, not take every other instance down.
 */
export interface AnswerLimits {
  /** Largest SSE event (frame), unfinished or whole. */
  maxFrameBytes: number;
  /** Largest non-streaming answer body. */
  maxAnswerBytes: number;
  /** Largest error body kept (only its message is wanted). */
  maxErrorBytes: number;
  /** From the request sent upstream to the end of its answer, streaming or not. */
  responseDeadlineMs: number;
  /** From the request sent upstream to its answer's headers. */
  upstreamTimeoutMs: number;
  /** Longest silence between upstream body reads (streaming or not), while the client reads. */
  idleTimeoutMs: number;
}

export const DEFAULT_ANSWER_LIMITS: Readonly<AnswerLimits> = {
  maxFrameBytes: 1024 * 1024,
  maxAnswerBytes: 32 * 1024 * 1024,
  maxErrorBytes: 64 * 1024,
  // Generous: a long generation at a few tokens per second, after minutes of loading.
  responseDeadlineMs: 30 * 60 * 1000,
  upstreamTimeoutMs: 300_000,
  idleTimeoutMs: 300_000,
};

/**
 * After `[DONE]`, the rest of the body is read only this much, and this long, so that the
 * connection can go back to the pool (a model server ends its body right after `[DONE]`); past
 * either the request is aborted rather than read for as long as the server likes.
 */
export const DRAIN_BYTES = 16 * 1024;
export const DRAIN_MS = 1_000;

const notRelayed = (what: string): ObProxyError =>
  obError('upstream_error', { message: `${what}; it was not relayed.` });

/** The answers for a model server past a limit; the stream forms end with "the stream was ended". */
export const limitErrors = {
  badStatus: (status: number): ObProxyError =>
    notRelayed(`The model server answered HTTP ${status}, which is not a chat completion`),
  answerTooLarge: (max: number): ObProxyError => notRelayed(`The model server's answer is larger than ${max} bytes`),
  errorBodyTooLarge: (status: number, max: number): ObProxyError =>
    notRelayed(`The model server answered HTTP ${status} with an error body larger than ${max} bytes`),
  tooSlow: (ms: number): ObProxyError =>
    obError('upstream_error', { message: `The model server's answer took longer than ${ms / 1000} s; it was ended.` }),
  frameTooLarge: (max: number): ObProxyError =>
    obError('upstream_error', {
      message: `The model server sent an event larger than ${max} bytes; the stream was ended.`,
    }),
  notSse: (): ObProxyError =>
    obError('upstream_error', {
      message: 'The model server sent data that is not an OpenAI event stream; the stream was ended.',
    }),
  /** Re-encoding an event (or a plain answer whose shape needed filling in) overflowed the encoder. */
  tooDeep: (stream: boolean): ObProxyError =>
    stream
      ? obError('upstream_error', {
          message: 'The model server sent an event nested too deeply to relay; the stream was ended.',
        })
      : notRelayed("The model server's answer is nested too deeply to relay"),
  notJson: (): ObProxyError =>
    obError('upstream_error', {
      message: 'The model server sent an event that is not valid JSON; the stream was ended.',
    }),
};
