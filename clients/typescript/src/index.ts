export { MemsiteClient, camelCase, camelKeys, snakeCase, MAX_BATCH, MESSAGE_PAGE } from "./client.js";
export type { MemsiteClientOptions } from "./client.js";
export { HttpApi, newIdempotencyKey, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_MS, IDEMPOTENCY_HEADER } from "./transport.js";
export type { Logger, Query, RequestOptions, TransportOptions } from "./transport.js";
export {
  ApiError,
  AuthenticationError,
  ConflictError,
  ConnectionError,
  IdempotencyError,
  MemsiteError,
  NotFoundError,
  PayloadTooLargeError,
  RateLimitError,
  ServerError,
  ValidationError,
  errorClassFor,
} from "./errors.js";
export type { ApiErrorInit, ErrorFields } from "./errors.js";
export { contentText, toOpenAIMessage, stableJson } from "./chat.js";
export type { ChatMessage, ContentPart, ToolCall } from "./chat.js";
export type * from "./types.js";
