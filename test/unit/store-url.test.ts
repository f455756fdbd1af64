import { describe, expect, it } from 'vitest';
import { isPostgresUrl } from '../../src/store/store-url.js';

describe('isPostgresUrl', () => {
  it('takes postgres:// and postgresql:// in any case for PostgreSQL, anything else for a file', () => {
    const urls = ['postgres://ob@db/x', 'postgresql://db/x', 'POSTGRES://db/x', 'PostgreSQL://db'];
    const files = ['/home/x/db.json', 'postgres.json', 'postgres:/db', 'mysql://db/x', './postgres://x', ''];
    expect(urls.map(isPostgresUrl)).toEqual(urls.map(() => true));
    expect(files.map(isPostgresUrl)).toEqual(files.map(() => false));
  });
});
