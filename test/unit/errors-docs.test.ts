import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { ERRORS, ERROR_CODES, obError } from '../../src/errors.js';

describe('the error table and docs/errors.md', () => {
  it('list exactly the same codes, with the same status and type', async () => {
    const doc = await readFile(new URL('../../docs/errors.md', import.meta.url), 'utf8');
    const rows = [...doc.matchAll(/^\|(?: [0-9]*\s*\|)? `([a-z_]+)` \| ([^|]+) \| ([a-z_]+) \|/gm)];
    const documented = rows.map((m) => m[1]!);
    expect([...documented].sort()).toEqual([...ERROR_CODES].sort());
    for (const m of rows) {
      const spec = ERRORS[m[1] as keyof typeof ERRORS];
      expect(m[3], m[1]).toBe(spec.type);
      if (/^\d+$/.test(m[2]!.trim())) expect(Number(m[2]), m[1]).toBe(spec.status);
    }
  });

  it('every code renders the OpenAI envelope with a string code', () => {
    for (const code of ERROR_CODES) {
      const body = obError(code).toBody();
      expect(body).toEqual({ error: { message: expect.any(String), type: ERRORS[code].type, code, param: null } });
      expect(body.error.message.length).toBeGreaterThan(10);
    }
  });
});
