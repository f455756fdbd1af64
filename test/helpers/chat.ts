/** Plain HTTP calls to the data plane, for asserting whole bodies and headers. */
export async function postChat(
  baseUrl: string,
  key: string | null,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; json: unknown; text: string }> {
  const res = await fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(key === null ? {} : { authorization: `Bearer ${key}` }),
      ...headers,
    },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, headers: res.headers, json, text };
}

export function hello(model: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { model, messages: [{ role: 'user', content: 'Hello' }], ...extra };
}
