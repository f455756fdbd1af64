import type { Instance } from '../../src/domain/instance.js';
import type { KeyRecord } from '../../src/domain/key.js';

/**
 * What the auth hook found for a request (its key, and its instance as it was then, or as the
 * last re-check found it): set before the body is read, read by everything after it.
 */
export interface AuthContext {
  key: KeyRecord;
  instance: Instance;
}

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthContext | null;
  }
}
