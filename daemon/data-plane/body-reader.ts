import { type FastifyRequest, errorCodes } from 'fastify';

type Payload = NodeJS.ReadableStream & { receivedEncodedLength?: number };
type Done = (err: Error | null, body?: Buffer) => void;

/**
 * Reads a request body as bytes, up to `limit`, as Fastify's own reader does (the same 413 and
 * length errors, answered by the data plane's error handler), but into one buffer of the
 * announced length, each chunk copied in as it arrives and let go at once. Fastify's kept every
 * chunk of every body still arriving and then copied them into a second buffer: twice each body
 * while it was read, and the chunks (64 KiB each) left the allocator fragmented long after.
 * A body of unknown length (chunked) is gathered and joined as before.
 */
export function makeBodyReader(limit: number) {
  return function readBody(request: FastifyRequest, payload: Payload, done: Done): void {
    const declared = request.headers['content-length'];
    const length = declared === undefined ? Number.NaN : Number(declared);
    if (length > limit) {
      done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
      return;
    }
    const whole = Number.isSafeInteger(length) && length >= 0 ? Buffer.allocUnsafe(length) : null;
    const chunks: Buffer[] = [];
    let received = 0;
    const stop = (): void => {
      payload.removeListener('data', onData);
      payload.removeListener('end', onEnd);
      payload.removeListener('error', onEnd);
    };
    function onData(chunk: Buffer | string): void {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      const end = received + bytes.length;
      if (end > limit || (payload.receivedEncodedLength ?? 0) > limit) {
        stop();
        done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
        return;
      }
      if (whole === null) chunks.push(bytes);
      else if (end > whole.length) {
        stop();
        done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
        return;
      } else bytes.copy(whole, received);
      received = end;
    }
    function onEnd(err?: Error & { statusCode?: number }): void {
      stop();
      if (err != null) {
        if (!(typeof err.statusCode === 'number' && err.statusCode >= 400)) err.statusCode = 400;
        done(err);
        return;
      }
      if (whole !== null && received !== whole.length) {
        done(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
        return;
      }
      done(null, whole ?? Buffer.concat(chunks, received));
    }
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onEnd);
    payload.resume();
  };
}
