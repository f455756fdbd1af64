/**
 * The one error table. Every error ob-proxy answers itself (data plane, management API, CLI)
 * has a stable code here; docs/errors.md lists exactly these codes (a test keeps them in sync).
 * Foreign errors (undici, Fastify, fs) are translated into these at the edge that meets them.
 */

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'not_found_error'
  | 'conflict_error'
  | 'permission_error'
  | 'rate_limit_error'
  | 'api_error'
  | 'store_error';

interface ErrorSpec {
  readonly status: number;
  readonly type: ErrorType;
  /** The default sentence; call sites may give a more specific one. */
  readonly message: string;
}

export const ERRORS = {
  // Data plane, in the contract's check order.
  missing_api_key: {
    status: 400,
    type: 'invalid_request_error',
    message: 'No API key: send the header "Authorization: Bearer ob_sk_…" (SDKs: set apiKey).',
  },
  conflicting_api_keys: {
    status: 400,
    type: 'invalid_request_error',
    message:
      'The request names two different API keys, in x-api-key and in Authorization. Send the key in one of them (Anthropic SDK: apiKey or authToken, not both).',
  },
  invalid_api_key: {
    status: 401,
    type: 'authentication_error',
    message:
      'The API key is not valid. Check that it was copied whole; if it was, ask whoever gave you the key for a new one.',
  },
  revoked_api_key: {
    status: 401,
    type: 'authentication_error',
    message: 'This API key has been revoked and can never be used again. Ask whoever gave you the key for a new one.',
  },
  pack_ended: {
    status: 401,
    type: 'authentication_error',
    message:
      "The pack of this API key's deployment ended while the request was in flight; its keys are revoked. Ask whoever gave you the key for a new one, or to extend the pack before it ends next time.",
  },
  deployment_not_found: {
    status: 404,
    type: 'not_found_error',
    message:
      'No deployment exists for this API key any more. Ask whoever gave you the key for a key of a running instance.',
  },
  deployment_not_ready: {
    status: 409,
    type: 'conflict_error',
    message: 'The deployment for this API key is not ready. Retry when the instance is ready.',
  },
  payload_too_large: {
    status: 413,
    type: 'invalid_request_error',
    message:
      'The request body is larger than the proxy accepts. Shorten the conversation or ask the operator to raise --body-limit.',
  },
  invalid_json: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The request body is not a valid JSON object. Send a JSON chat completion request.',
  },
  invalid_request: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The request is malformed.',
  },
  model_mismatch: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The model does not match the model of the deployment this API key is bound to.',
  },
  unsupported_parameter: {
    status: 400,
    type: 'invalid_request_error',
    message:
      'This parameter is not supported: the deployment keeps no responses or conversations. Send the whole conversation in `input`.',
  },
  previous_response_not_found: {
    status: 400,
    type: 'invalid_request_error',
    message:
      'Previous response not found: a Responses WebSocket keeps only its own last response. Send the whole conversation in `input`.',
  },
  response_in_progress: {
    status: 409,
    type: 'conflict_error',
    message:
      'A response is under way on this WebSocket: send the next response.create once it has ended, or open another socket.',
  },
  model_not_found: {
    status: 404,
    type: 'not_found_error',
    message: 'No such model for this API key. GET /v1/models lists the one model it serves.',
  },
  management_route: {
    status: 403,
    type: 'permission_error',
    message:
      "This route manages the model server (pulling, pushing, creating, copying or deleting models and blobs): that is the operator's, never an API key's. Ask the operator for the model you need.",
  },
  route_not_found: {
    status: 404,
    type: 'not_found_error',
    message:
      'No such route. The proxy serves POST /v1/chat/completions and GET /v1/models; set your SDK base URL to {base_url}/v1.',
  },
  request_timeout: {
    status: 408,
    type: 'invalid_request_error',
    message: 'The request was not received in time. Send the whole request at once, then wait for the answer.',
  },
  headers_too_large: {
    status: 431,
    type: 'invalid_request_error',
    message: 'The request headers are too large. Send fewer or shorter headers.',
  },
  malformed_http: {
    status: 400,
    type: 'invalid_request_error',
    message: 'The request is not valid HTTP/1.1. Use an HTTP client or an OpenAI SDK.',
  },
  expectation_failed: {
    status: 417,
    type: 'invalid_request_error',
    message: 'The proxy supports only "Expect: 100-continue". Send the request without this Expect header.',
  },
  rate_limited: {
    status: 429,
    type: 'rate_limit_error',
    message: 'Too many requests with invalid API keys from this address. Wait and retry with a valid key.',
  },
  upstream_unavailable: {
    status: 502,
    type: 'api_error',
    message:
      'The model server could not be reached or closed the connection. Retry; if it persists, check the instance.',
  },
  upstream_timeout: {
    status: 504,
    type: 'api_error',
    message: 'The model server did not answer in time. Retry; a model may still be loading.',
  },
  upstream_error: {
    status: 502,
    type: 'api_error',
    message: 'The model server answered with an error.',
  },
  shutting_down: {
    status: 503,
    type: 'api_error',
    message: 'The proxy is shutting down. Retry in a moment.',
  },
  proxy_overloaded: {
    status: 503,
    type: 'api_error',
    message:
      'The proxy holds as many request bodies as its memory allows (--body-memory). Retry in a moment; if it persists, the operator can raise --body-memory, or lower --body-limit or --queue.',
  },
  store_unreachable: {
    status: 503,
    type: 'api_error',
    message:
      'The proxy has lost touch with its store for too long to be sure this key is still valid. Retry in a moment; if it persists, the operator must check the database.',
  },
  internal_error: {
    status: 500,
    type: 'api_error',
    message: 'Internal error in the proxy. Retry; if it persists, report it with the x-request-id header.',
  },

  // Management API and CLI.
  invalid_argument: {
    status: 400,
    type: 'invalid_request_error',
    message: 'An argument is not valid.',
  },
  unknown_model: {
    status: 400,
    type: 'invalid_request_error',
    message: 'Unknown model id.',
  },
  model_in_use: {
    status: 409,
    type: 'conflict_error',
    message: 'The model cannot be disallowed while an instance that is not terminated runs it.',
  },
  instance_not_found: {
    status: 404,
    type: 'not_found_error',
    message: 'No instance with this id. List instances with `ob-proxy instances list`.',
  },
  instance_exists: {
    status: 409,
    type: 'conflict_error',
    message: 'An instance with this id already exists.',
  },
  invalid_transition: {
    status: 409,
    type: 'conflict_error',
    message: 'The instance cannot make this state change.',
  },
  instance_not_ready: {
    status: 409,
    type: 'conflict_error',
    message: 'Keys can be created only for a ready instance.',
  },
  endpoint_unreachable: {
    status: 502,
    type: 'api_error',
    message:
      'The model server did not answer GET /v1/models with a model list. Check the endpoint and that the server is up, or skip the check with --no-probe.',
  },
  model_not_served: {
    status: 409,
    type: 'conflict_error',
    message:
      "The model server does not serve the instance's model. Pull or load the model on it, or skip the check with --no-probe.",
  },
  key_not_found: {
    status: 404,
    type: 'not_found_error',
    message: 'No key with this id. List keys with `ob-proxy keys list`.',
  },
  key_revoked: {
    status: 409,
    type: 'conflict_error',
    message: 'This key is already revoked.',
  },
  reveal_refused: {
    status: 409,
    type: 'conflict_error',
    message:
      "This key's secret cannot be shown: secrets are shown once, and only an undisplayed default key can be revealed. Create a new key instead.",
  },
  store_write_failed: {
    status: 503,
    type: 'store_error',
    message:
      'The store could not be written; nothing was changed. Check free disk space and permissions of the home folder.',
  },
  daemon_unreachable: {
    status: 503,
    type: 'api_error',
    message: 'The ob-proxy daemon is not running or its socket cannot be reached. Start it with `ob-proxy serve`.',
  },
  revocation_unconfirmed: {
    status: 504,
    type: 'api_error',
    message:
      'The revocation is made, but not every live daemon of the store confirmed it within the --wait-timeout. Check the daemons named with `ob-proxy status`.',
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERRORS;

export const ERROR_CODES = Object.keys(ERRORS) as ErrorCode[];

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERRORS, value);
}

export interface ObProxyErrorOptions {
  message?: string;
  param?: string | null;
  /** Overrides the table's status: used only to pass an upstream's error status on. */
  status?: number;
  /** The error code as the client sees it, when it is not ours (an upstream's string code). */
  wireCode?: string;
  /** Overrides the status's retry advice (shouldRetry): a 409 for an instance that will never be ready again. */
  retry?: boolean;
  cause?: unknown;
}

export class ObProxyError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: ErrorType;
  readonly param: string | null;
  readonly wireCode: string;
  /** The `x-should-retry` advice, or null for none. */
  readonly retry: boolean | null;

  constructor(code: ErrorCode, options: ObProxyErrorOptions = {}) {
    const spec: ErrorSpec = ERRORS[code];
    super(options.message ?? spec.message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ObProxyError';
    this.code = code;
    this.status = options.status ?? spec.status;
    this.type = spec.type;
    this.param = options.param ?? null;
    this.wireCode = options.wireCode ?? code;
    this.retry = options.retry ?? shouldRetry(this.status);
  }

  /**
   * Anthropic's error envelope (the Messages API): `type` from Anthropic's table, which its
   * clients read, and our stable code beside it in `code`.
   */
  toAnthropicBody(): AnthropicErrorBody {
    return { type: 'error', error: { type: anthropicType(this.status), message: this.message, code: this.wireCode } };
  }

  /**
   * Ollama's own error shape (its native API, `/api/*`): `{"error": "<message>"}`, which its
   * clients read, and our stable code beside it in `code`.
   */
  toOllamaBody(): OllamaErrorBody {
    return { error: this.message, code: this.wireCode };
  }

  /** The OpenAI error envelope, which every OpenAI SDK parses. */
  toBody(): ErrorBody {
    return { error: { message: this.message, type: this.type, code: this.wireCode, param: this.param } };
  }
}

export interface OllamaErrorBody {
  error: string;
  code: string;
}

export interface AnthropicErrorBody {
  type: 'error';
  error: { type: string; message: string; code: string };
}

/** Anthropic's error types by status (docs.anthropic.com, "Errors"), which Claude Code and the SDKs read. */
const ANTHROPIC_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  402: 'billing_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  503: 'overloaded_error',
  504: 'timeout_error',
  529: 'overloaded_error',
};

export function anthropicType(status: number): string {
  return ANTHROPIC_TYPES[status] ?? (status < 500 ? 'invalid_request_error' : 'api_error');
}

/**
 * Whether a client should send the same request again: the `x-should-retry` answer header,
 * which the OpenAI and Anthropic SDKs (and the agents built on them) obey before their own rule.
 * A refusal that the same request meets again (a bad body, a bad or revoked key, a gone
 * deployment, a body too large) says false, so a client fails at once instead of retrying for
 * minutes; a wait that passes (429, 503) says true. null: no advice, the client's own rule.
 */
export function shouldRetry(status: number): boolean | null {
  if (status === 429 || status === 503) return true;
  if (status === 400 || status === 401 || status === 403 || status === 404 || status === 413) return false;
  return null;
}

export interface ErrorBody {
  error: { message: string; type: string; code: string; param: string | null };
}

export function obError(code: ErrorCode, options?: ObProxyErrorOptions): ObProxyError {
  return new ObProxyError(code, options);
}
