/**
 * A model server that reports reasoning tokens apart, as OpenAI's API does: every chat
 * completion, plain or streamed, answers "ok" with 7 prompt and 20 completion tokens, 12 of them
 * reasoning. It lists `model` as its only model.
 */
import { type Server, createServer } from 'node:http';

export function reasoningServer(model: string): Promise<{ url: string; server: Server }> {
  const usage = {
    prompt_tokens: 7,
    completion_tokens: 20,
    total_tokens: 27,
    completion_tokens_details: { reasoning_tokens: 12 },
  };
  const server = createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/v1/models') {
      res
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ object: 'list', data: [{ id: model, object: 'model', created: 0, owned_by: 'test' }] }));
      return;
    }
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => {
      const stream = (JSON.parse(body) as { stream?: boolean }).stream === true;
      const head = { id: 'x', created: 1, model };
      if (!stream) {
        res.writeHead(200, { 'content-type': 'application/json' }).end(
          JSON.stringify({
            ...head,
            object: 'chat.completion',
            choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'stop' }],
            usage,
          }),
        );
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(
        `data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: 'ok' }, finish_reason: null }] })}\n\n`,
      );
      res.write(
        `data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`,
      );
      res.write(`data: ${JSON.stringify({ ...head, object: 'chat.completion.chunk', choices: [], usage })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  return new Promise((r) =>
    server.listen(0, '127.0.0.1', () =>
      r({ url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, server }),
    ),
  );
}
