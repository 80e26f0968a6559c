/**
 * What the client throws: `ApiError` (and a subclass per kind of refusal) for what the server
 * answered, carrying the API's `error`, `detail` and `fields`; `MemsiteError` for misuse.
 */

/** Per-field problems, by path: `{"messages[1].role": ["..."]}`. */
export type ErrorFields = Record<string, string[]>;

/** Base of every error this package throws on purpose. */
export class MemsiteError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export interface ApiErrorInit {
  status: number | null;
  error?: string;
  detail?: string;
  fields?: ErrorFields;
  retryAfter?: number | null;
  method?: string;
  path?: string;
  cause?: unknown;
}

/** The server answered with an error, or could not be reached (`status` is null). */
export class ApiError extends MemsiteError {
  /** The HTTP status; null when no answer came (`error` is "unreachable" or "transport"). */
  readonly status: number | null;
  /** The API's error code: `validation_error`, `not_found`, `throttled`, ... */
  readonly error: string;
  readonly detail: string;
  readonly fields: ErrorFields;
  /** Seconds the server asked to wait (its Retry-After), when it said. */
  readonly retryAfter: number | null;
  readonly method: string;
  readonly path: string;

  constructor(init: ApiErrorInit) {
    const error = init.error ?? "";
    const detail = init.detail ?? "";
    super(`${init.status ?? "no response"} ${error}: ${detail}`.trim());
    this.status = init.status;
    this.error = error;
    this.detail = detail;
    this.fields = init.fields ?? {};
    this.retryAfter = init.retryAfter ?? null;
    this.method = init.method ?? "";
    this.path = init.path ?? "";
    if (init.cause !== undefined) {
      (this as { cause?: unknown }).cause = init.cause;
    }
  }
}

/** 400: the body or query was refused; `fields` names each problem by path. */
export class ValidationError extends ApiError {}
/** 401/403: the key is missing, wrong, revoked, or may not do this. */
export class AuthenticationError extends ApiError {}
/** 404: no such object, or another team's (the server tells neither apart). */
export class NotFoundError extends ApiError {}
/** 409: e.g. an external_id already used by another session of the team. */
export class ConflictError extends ApiError {}
/** 413: the body is over the server's limit. */
export class PayloadTooLargeError extends ApiError {}
/** 422: an Idempotency-Key or message_id sent again with other content. */
export class IdempotencyError extends ApiError {}
/** 429: throttled, over the daily LLM budget, or too many streams (`retryAfter` says when). */
export class RateLimitError extends ApiError {}
/** 5xx: the database, the LLM or the server is unavailable. */
export class ServerError extends ApiError {}
/** No answer: the server could not be reached, or the connection dropped. */
export class ConnectionError extends ApiError {}

const BY_STATUS: Record<number, typeof ApiError> = {
  400: ValidationError,
  401: AuthenticationError,
  403: AuthenticationError,
  404: NotFoundError,
  409: ConflictError,
  413: PayloadTooLargeError,
  422: IdempotencyError,
  429: RateLimitError,
};

/** The error class for an HTTP status. */
export function errorClassFor(status: number): typeof ApiError {
  return BY_STATUS[status] ?? (status >= 500 ? ServerError : ApiError);
}
