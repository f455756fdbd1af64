import { describe, expect, it } from 'vitest';
import { ObProxyError, obError } from '../../src/errors.js';
import { translateUpstreamError, upstreamStatusError } from '../../src/upstream/upstream-errors.js';

function fault(code: string): Error {
  return Object.assign(new Error(`undici says ${code}`), { code });
}

describe('translateUpstreamError: undici and socket failures, once, into our codes', () => {
  it.each([
    ['UND_ERR_HEADERS_TIMEOUT', 'upstream_timeout', 504],
    ['UND_ERR_BODY_TIMEOUT', 'upstream_timeout', 504],
    ['UND_ERR_CONNECT_TIMEOUT', 'upstream_unavailable', 502],
    ['ECONNREFUSED', 'upstream_unavailable', 502],
    ['ECONNRESET', 'upstream_unavailable', 502],
    ['UND_ERR_SOCKET', 'upstream_unavailable', 502],
  ])('%s → %s (%i), keeping the cause and not its text', (code, want, status) => {
    const err = fault(code);
    const t = translateUpstreamError(err);
    expect([t.code, t.status]).toEqual([want, status]);
    expect(t.cause).toBe(err);
    expect(t.message).not.toContain('undici says');
  });

  it('names what to check for a refused or slow connection', () => {
    expect(translateUpstreamError(fault('ECONNREFUSED')).message).toBe(
      'The model server refused the connection. Check that the instance is up and its endpoint is right.',
    );
    expect(translateUpstreamError(fault('UND_ERR_CONNECT_TIMEOUT')).message).toBe(
      'The model server did not accept a connection in time. Check that the instance is up.',
    );
  });

  it('passes our own errors through, and survives values that are not errors', () => {
    const ours = obError('upstream_timeout', { message: 'ours' });
    expect(translateUpstreamError(ours)).toBe(ours);
    for (const v of [null, undefined, 'text', 42, {}]) {
      const t = translateUpstreamError(v);
      expect(t).toBeInstanceOf(ObProxyError);
      expect(t.code).toBe('upstream_unavailable');
    }
  });
});

describe("upstreamStatusError: a model server's error status in our envelope", () => {
  it.each([
    [
      'OpenAI envelope (vLLM, Ollama)',
      400,
      'application/json',
      '{"error":{"message":"model is required","type":"invalid_request_error","code":null}}',
      'upstream_error',
      'Model server error (HTTP 400): model is required',
    ],
    [
      'string code kept',
      404,
      'application/json',
      '{"error":{"message":"model \\"x\\" not found","code":"model_not_found"}}',
      'model_not_found',
      'Model server error (HTTP 404): model "x" not found',
    ],
    [
      'integer code (vLLM) dropped',
      400,
      'application/json; charset=utf-8',
      '{"error":{"message":"bad","code":400}}',
      'upstream_error',
      'Model server error (HTTP 400): bad',
    ],
    [
      'Ollama native string error',
      500,
      'application/json',
      '{"error":"llama runner process has terminated"}',
      'upstream_error',
      'Model server error (HTTP 500): llama runner process has terminated',
    ],
    [
      'FastAPI detail',
      422,
      'application/json',
      '{"detail":"Unprocessable"}',
      'upstream_error',
      'Model server error (HTTP 422): Unprocessable',
    ],
    [
      'JSON content type, not JSON',
      502,
      'application/json',
      'upstream broke',
      'upstream_error',
      'Model server error (HTTP 502): upstream broke',
    ],
    [
      'HTML page',
      502,
      'text/html',
      '<html><body>Bad Gateway</body></html>',
      'upstream_error',
      'Model server error (HTTP 502): The model server answered HTTP 502 without an error message.',
    ],
    [
      'empty body',
      503,
      undefined,
      '  ',
      'upstream_error',
      'Model server error (HTTP 503): The model server answered HTTP 503 without an error message.',
    ],
    [
      'plain text',
      500,
      'text/plain',
      ' out of memory \n',
      'upstream_error',
      'Model server error (HTTP 500): out of memory',
    ],
  ])('%s', (_what, status, type, body, wireCode, message) => {
    const e = upstreamStatusError(status, type, body);
    expect({ code: e.code, status: e.status, wireCode: e.wireCode, message: e.message }).toEqual({
      code: 'upstream_error',
      status,
      wireCode,
      message,
    });
  });

  it('a long plain-text body is cut to 500 characters', () => {
    const e = upstreamStatusError(500, 'text/plain', 'x'.repeat(5000));
    expect(e.message).toBe(`Model server error (HTTP 500): ${'x'.repeat(500)}`);
  });
});
