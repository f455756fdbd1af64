import type { FastifySchemaValidationError } from 'fastify';
import { INSTANCE_STATES } from '../../src/domain/instance.js';
import { LIMIT_NAMES } from '../../src/domain/key.js';
import { LIMIT_MAX } from '../../src/domain/validate.js';
import { type ObProxyError, obError } from '../../src/errors.js';

/*
 * JSON Schemas of the management routes' inputs, checked by Fastify before a handler runs: the
 * shape and types of every body, path and query. What only the core can judge (an id's
 * characters, a date, a model the daemon serves, a state that allows the move) stays with the
 * core, which the demo and the tests also call directly. Unknown fields are refused, so a CLI
 * newer than the daemon is told so instead of having a flag silently ignored.
 */

const STRING = { type: 'string' } as const;
const STRING_OR_NULL = { type: ['string', 'null'] } as const;
const ABSOLUTE_PATH_OR_NULL = { type: ['string', 'null'], pattern: '^/' } as const;
const LIMIT = { type: ['integer', 'null'], minimum: 1, maximum: LIMIT_MAX } as const;
const LIMITS = {
  type: 'object',
  additionalProperties: false,
  properties: Object.fromEntries(LIMIT_NAMES.map((n) => [n, LIMIT])),
} as const;

function object(properties: Record<string, object>, required: string[] = []): object {
  return { type: 'object', additionalProperties: false, properties, required };
}

/** A body that may be absent or `{}`: Fastify validates an absent body as null. */
function optionalObject(properties: Record<string, object>): object {
  return { type: ['object', 'null'], additionalProperties: false, properties };
}

export const ID_PARAMS = object({ id: STRING }, ['id']);
export const NO_BODY = optionalObject({});

export const ADD_INSTANCE_BODY = object(
  {
    id: STRING,
    model: STRING,
    endpoint: STRING_OR_NULL,
    packEndsAt: STRING_OR_NULL,
    upstreamTokenFile: ABSOLUTE_PATH_OR_NULL,
  },
  ['id', 'model'],
);
export const READY_BODY = optionalObject({
  endpoint: STRING_OR_NULL,
  upstreamTokenFile: ABSOLUTE_PATH_OR_NULL,
  wait: { type: 'boolean' },
  probe: { type: 'boolean' },
});
export const EXTEND_BODY = object({ packEndsAt: STRING, shorten: { type: 'boolean' } }, ['packEndsAt']);
// Bounded here only so a body cannot be a list of thousands; the core judges each alias and the total.
const ALIAS_LIST = { type: 'array', items: STRING, maxItems: 1000 } as const;
export const ALIASES_BODY = object({ add: ALIAS_LIST, remove: ALIAS_LIST, clear: { type: 'boolean' } });
export const INSTANCES_QUERY = object({ state: { type: 'string', enum: [...INSTANCE_STATES] } });
// Bounded so a body cannot be a list of thousands; the core judges each id and the total.
const MODEL_LIST = { type: 'array', items: STRING, maxItems: 1000 } as const;
export const MODELS_BODY = object({ allow: MODEL_LIST, disallow: MODEL_LIST });

export const CREATE_KEY_BODY = object(
  { instance: STRING, name: STRING, limits: { ...LIMITS, type: ['object', 'null'] } },
  ['instance', 'name'],
);
export const LIMITS_BODY = { ...LIMITS, type: ['object', 'null'] };
// At most 30 days (the core's ROTATION_GRACE_MAX_MS); 0 or absent: the old key revoked at once.
export const ROTATE_BODY = optionalObject({ graceSeconds: { type: 'integer', minimum: 0, maximum: 30 * 86_400 } });
const PAGE = { limit: STRING, after: STRING, format: { type: 'string', enum: ['json', 'lines'] } } as const;
export const KEYS_QUERY = object({
  instance: STRING,
  status: { type: 'string', enum: ['active', 'revoked'] },
  ...PAGE,
});
export const REVOCATIONS_QUERY = object({ instance: STRING, ...PAGE });
/** A list route's query: its filters, and a page (`limit`, `after`) or the whole list (as JSON lines with `format=lines`). */
export interface ListQuery {
  instance?: string;
  status?: 'active' | 'revoked';
  limit?: string;
  after?: string;
  format?: 'json' | 'lines';
}
export const AUDIT_QUERY = object({ instance: STRING, limit: STRING });
export const USAGE_QUERY = object({ instance: STRING, key: STRING, since: STRING, ...PAGE });
export const USAGE_BUCKETS_QUERY = object({
  instance: STRING,
  key: STRING,
  since: STRING,
  until: STRING,
  by: { type: 'string', enum: ['hour', 'day'] },
});

export interface AddInstanceBody {
  id: string;
  model: string;
  endpoint?: string | null;
  packEndsAt?: string | null;
  upstreamTokenFile?: string | null;
}
export interface ReadyBody {
  endpoint?: string | null;
  upstreamTokenFile?: string | null;
  wait?: boolean;
  probe?: boolean;
}
export interface AliasesBody {
  add?: string[];
  remove?: string[];
  clear?: boolean;
}
export interface ModelsBody {
  allow?: string[];
  disallow?: string[];
}
export interface CreateKeyBody {
  instance: string;
  name: string;
  limits?: Record<string, number | null> | null;
}

const DATE = 'must be an ISO 8601 time with a zone, e.g. 2026-12-01T18:00:00Z.';

/** What each field must be, in the words the core uses for the same field: the CLI prints either. */
const HINTS: Record<string, string> = {
  id: 'Instance id must be 1-64 characters: letters, digits, and . _ : - (not first).',
  model: 'model must be the id of an allowed model (`ob-proxy models list` lists them).',
  allow: 'allow must be a list of model ids.',
  disallow: 'disallow must be a list of model ids.',
  endpoint: "Endpoint must be the model server's base URL, e.g. http://10.0.0.5:11434.",
  packEndsAt: `packEndsAt ${DATE}`,
  upstreamTokenFile: "--upstream-token-file must be an absolute path to a file holding the model server's token.",
  wait: 'wait must be true or false.',
  probe: 'probe must be true or false.',
  shorten: 'shorten must be true or false.',
  add: 'add must be a list of model ids.',
  remove: 'remove must be a list of model ids.',
  clear: 'clear must be true or false.',
  instance: 'instance must be an instance id: list them with `ob-proxy instances list`.',
  name: 'Key name is required: give --name.',
  limits: 'Limits must be an object with rpm, tpm and concurrency.',
  state: `--state must be one of ${INSTANCE_STATES.join(', ')}.`,
  key: 'key must be a key id: list them with `ob-proxy keys list`.',
  since: `since ${DATE}`,
  until: `until ${DATE}`,
  by: 'by must be hour or day.',
  limit: 'limit must be a whole number.',
  status: 'status must be active or revoked.',
  format: 'format must be json or lines.',
  graceSeconds: 'graceSeconds must be a whole number of seconds from 0 to 30 days.',
  ...Object.fromEntries(LIMIT_NAMES.map((n) => [n, `--${n} must be a whole number from 1 to ${LIMIT_MAX}, or none.`])),
};

/** Fastify's name for the part of the request that failed (its SchemaErrorDataVar). */
type Part = 'body' | 'headers' | 'params' | 'querystring';

const PART: Record<Part, string> = {
  body: 'request body',
  params: 'request path',
  querystring: 'query string',
  headers: 'headers',
};

/**
 * A schema refusal in our error shape: 400 `invalid_argument`, `param` the field, and the sentence
 * the core would give for it. Fastify stops at the first error (allErrors is off).
 */
export function schemaError(errors: FastifySchemaValidationError[], part: Part): ObProxyError {
  const e = errors[0];
  const where = PART[part];
  if (e === undefined) return obError('invalid_argument', { message: `The ${where} is not valid.` });
  const params = e.params as { missingProperty?: string; additionalProperty?: string };
  if (e.keyword === 'additionalProperties' && params.additionalProperty !== undefined) {
    const field = params.additionalProperty.slice(0, 64);
    return obError('invalid_argument', {
      param: field,
      message: `The ${where} has a field ${JSON.stringify(field)} this daemon does not take. Is the CLI newer than the daemon?`,
    });
  }
  // A list's item (`/add/0`) is named by its list.
  const field =
    params.missingProperty ??
    e.instancePath
      .split('/')
      .filter((p) => !/^\d+$/.test(p))
      .pop() ??
    '';
  if (field === '') return obError('invalid_argument', { message: `The ${where} must be a JSON object.` });
  return obError('invalid_argument', {
    param: field,
    message: HINTS[field] ?? `${field} in the ${where} ${e.message ?? 'is not valid'}.`,
  });
}

/** `keys`: key ids, comma-separated; `instance`: every revoked key of that instance. */
export const CONFIRMATIONS_QUERY = object({ keys: STRING, instance: STRING });
