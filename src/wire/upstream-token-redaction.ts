/**
 * The instance's upstream token (`--upstream-token-file`) is the operator's secret: a model
 * server, or a gateway in front of it, that echoes the request's `Authorization` header in an
 * error ("invalid token: Bearer sk-…") handed it to every client of the instance, since error
 * messages and error events are passed on. What the proxy passes on from an error is cleared of
 * it. (A server that means to leak its token can always encode it; this stops the echo.)
 */
export const REDACTED_TOKEN = '[upstream token]';

/** `text` with each occurrence of `token` replaced. */
export function redactToken(text: string, token: string | undefined): string {
  if (token === undefined || !text.includes(token)) return text;
  return text.split(token).join(REDACTED_TOKEN);
}

/**
 * The JSON text `data` with `token` replaced in every string: `data` itself when no string holds
 * it, else encoded again; null when that cannot be done (the token in a key, or nested too deeply
 * to encode again). Judged on the decoded strings, so no escape (`\/`, `\u0041`) hides it.
 */
export function redactTokenInJson(data: string, token: string): string | null {
  let changed = false;
  let inKey = false;
  try {
    const value: unknown = JSON.parse(data, (key: string, v: unknown) => {
      if (key.includes(token)) inKey = true;
      if (typeof v !== 'string' || !v.includes(token)) return v;
      changed = true;
      return redactToken(v, token);
    });
    if (inKey) return null;
    return changed ? JSON.stringify(value) : data;
  } catch {
    return null;
  }
}
