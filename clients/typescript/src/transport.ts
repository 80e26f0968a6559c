/**
 * HTTP to the memsite API with native fetch: explicit timeouts, error mapping, and retries only
 * where they are safe (the same policy as the Python client's memory_client/transport.py):
 *
 * - A request whose connection could not be opened (refused, unknown host) is retried: the server
 *   never saw it.
 * - 429 is retried for every request: a throttled request did nothing. A Retry-After longer than
 *   `maxRetryAfterMs` (a daily budget, minutes of throttling) is not waited for: the error says it.
 * - GETs, searches and writes sent with an `Idempotency-Key` (session creation, message appends)
 *   are also retried after a timeout, a dropped connection and 500/502/503/504: a GET changes
 *   nothing, and the server answers a keyed write's repeat with the stored answer.
 * - Other writes (PATCH, DELETE, reset, record appends) are not retried once they may have reached
 *   the server: their outcome is unknown, and the caller gets the error to decide.
 *
 * The API key is kept in a private field and sent only in the Authorization header: it is never
 * logged, never part of an error, and not shown by console.log or JSON.stringify of the client.
 */
import { ApiError, ConnectionError, errorClassFor, MemsiteError } from "./errors.js";

export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_RETRIES = 2;
export const IDEMPOTENCY_HEADER = "Idempotency-Key";
const RETRY_STATUSES = new Set([429, 500, 502, 503, 504]);
const BACKOFF_MS = 250;
const MAX_BACKOFF_MS = 10_000;
const NEVER_SENT_CODES = new Set(["ECONNREFUSED", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH", "ENETUNREACH"]);

/** Where the client reports its retries: `console` by default; never given the key. */
export interface Logger {
  warn(message: string): void;
}

export interface TransportOptions {
  /** The server, e.g. `http://127.0.0.1:8000` (`/api/v1` is added). Default: `MEMSITE_URL`. */
  baseUrl?: string;
  /** The bearer key. Default: `MEMSITE_API_KEY`. */
  apiKey?: string;
  /** Per attempt, in milliseconds (default 10 s). */
  timeoutMs?: number;
  /** Retries after the first attempt (default 2), see the retry policy. */
  maxRetries?: number;
  /** The longest Retry-After waited for (default 10 s); a longer one is thrown at once. */
  maxRetryAfterMs?: number;
  /** Another fetch (a proxy agent, a test double); default: the global fetch. */
  fetch?: typeof fetch;
  /** Where retries are reported (default `console`); `null` for silence. */
  logger?: Logger | null;
}

export type Query = Record<string, string | number | boolean | null | undefined | readonly (string | number)[]>;

export interface RequestOptions {
  body?: unknown;
  query?: Query;
  /** Safe to repeat after the request may have reached the server. */
  idempotent?: boolean;
  /** Sent as Idempotency-Key on every attempt; makes the write safe to retry. */
  idempotencyKey?: string;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Return the raw Response (for streams and text) instead of parsed JSON. */
  raw?: boolean;
}

function env(name: string): string | undefined {
  const processEnv = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env;
  return processEnv?.[name] || undefined;
}

/** A fresh key for one logical write; reuse it for every retry of that write. */
export function newIdempotencyKey(): string {
  return globalThis.crypto.randomUUID();
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}

function retryAfterMs(response: Response | null): number | null {
  const value = response?.headers.get("Retry-After");
  if (!value) return null;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - Date.now());
}

function neverSent(error: unknown): boolean {
  let cause: unknown = error;
  for (let depth = 0; depth < 4 && cause; depth += 1) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === "string" && NEVER_SENT_CODES.has(code)) return true;
    cause = (cause as { cause?: unknown }).cause;
  }
  return false;
}

function errorFrom(response: Response, text: string, method: string, path: string): ApiError {
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  const parsed =
    typeof body === "object" && body !== null && !Array.isArray(body)
      ? (body as Record<string, unknown>)
      : { detail: text.slice(0, 200) || response.statusText };
  const retryAfter = retryAfterMs(response);
  const Kind = errorClassFor(response.status);
  return new Kind({
    status: response.status,
    error: String(parsed.error ?? ""),
    detail: typeof parsed.detail === "string" ? parsed.detail : JSON.stringify(parsed.detail ?? ""),
    fields: (parsed.fields as Record<string, string[]> | undefined) ?? {},
    retryAfter: retryAfter === null ? null : retryAfter / 1000,
    method,
    path,
  });
}

/** One authenticated connection to the /api/v1/ root. */
export class HttpApi {
  readonly root: string;
  readonly timeoutMs: number;
  readonly maxRetries: number;
  readonly maxRetryAfterMs: number;
  readonly #apiKey: string;
  readonly #fetch: typeof fetch;
  readonly #logger: Logger | null;

  constructor(options: TransportOptions = {}) {
    const baseUrl = options.baseUrl ?? env("MEMSITE_URL");
    const apiKey = options.apiKey ?? env("MEMSITE_API_KEY");
    if (!baseUrl) {
      throw new MemsiteError("No server URL: pass baseUrl or set MEMSITE_URL (e.g. http://127.0.0.1:8000).");
    }
    if (!apiKey) throw new MemsiteError("No API key: pass apiKey or set MEMSITE_API_KEY.");
    let root = baseUrl.replace(/\/+$/, "");
    if (!root.endsWith("/api/v1")) root += "/api/v1";
    this.root = root + "/";
    this.#apiKey = apiKey;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.maxRetries = options.maxRetries ?? DEFAULT_MAX_RETRIES;
    this.maxRetryAfterMs = options.maxRetryAfterMs ?? MAX_BACKOFF_MS;
    this.#fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
    this.#logger = options.logger === undefined ? console : options.logger;
  }

  url(path: string, query?: Query): string {
    const url = new URL(path.replace(/^\//, ""), this.root);
    for (const [name, value] of Object.entries(query ?? {})) {
      if (value === undefined || value === null) continue;
      url.searchParams.set(name, Array.isArray(value) ? value.join(",") : String(value));
    }
    return url.toString();
  }

  /** Send one request; return its JSON (null for 204), or throw the ApiError it answered. */
  async request<T = unknown>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    const { response, text } = await this.exchange(method, path, options);
    if (options.raw) return response as T;
    if (response.status === 204 || !text) return null as T;
    const type = response.headers.get("Content-Type") ?? "";
    return (type.includes("json") ? JSON.parse(text) : text) as T;
  }

  get<T = unknown>(path: string, query?: Query, options: RequestOptions = {}): Promise<T> {
    return this.request<T>("GET", path, { ...options, query, idempotent: true });
  }

  /**
   * The attempts of one request. The timeout covers each attempt's answer and body; a raw
   * answer (a stream) is handed over once its headers came, and the caller's signal ends it.
   */
  private async exchange(method: string, path: string, options: RequestOptions): Promise<{ response: Response; text: string }> {
    const headers: Record<string, string> = {
      Accept: "application/json",
      ...options.headers,
      Authorization: `Bearer ${this.#apiKey}`,
    };
    let idempotent = options.idempotent ?? method === "GET";
    if (options.idempotencyKey !== undefined) {
      headers[IDEMPOTENCY_HEADER] = options.idempotencyKey;
      idempotent = true;
    }
    let body: string | undefined;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["Content-Type"] = "application/json";
    }
    const url = this.url(path, options.query);
    for (let attempt = 0; ; attempt += 1) {
      let response: Response | null = null;
      let text = "";
      let failure: unknown = null;
      const timeout = new AbortController();
      const timer = setTimeout(() => timeout.abort(new Error(`timed out after ${this.timeoutMs} ms`)), this.timeoutMs);
      const onAbort = () => timeout.abort(options.signal?.reason);
      options.signal?.addEventListener("abort", onAbort, { once: true });
      try {
        response = await this.#fetch(url, { method, headers, body, signal: timeout.signal });
        if (!(options.raw && response.ok)) text = await response.text();
      } catch (error) {
        if (options.signal?.aborted) throw options.signal.reason;
        failure = error;
        response = null;
      } finally {
        clearTimeout(timer);
        if (!(options.raw && response?.ok)) options.signal?.removeEventListener("abort", onAbort);
      }
      let waitMs: number;
      if (response === null) {
        const sentNot = neverSent(failure);
        if (!(sentNot || idempotent) || attempt >= this.maxRetries) {
          const reason =
            failure instanceof Error ? ((failure.cause as Error | undefined)?.message ?? failure.message) : String(failure);
          throw new ConnectionError({
            status: null,
            error: sentNot ? "unreachable" : "transport",
            detail: `${method} ${path}: ${reason}`,
            method,
            path,
            cause: failure,
          });
        }
        waitMs = this.backoff(attempt);
      } else {
        if (response.ok) return { response, text };
        const retryable = RETRY_STATUSES.has(response.status) && (idempotent || response.status === 429);
        const asked = retryAfterMs(response);
        if (!retryable || attempt >= this.maxRetries || (asked !== null && asked > this.maxRetryAfterMs)) {
          throw errorFrom(response, text, method, path);
        }
        waitMs = asked ?? this.backoff(attempt);
      }
      this.#logger?.warn(
        `memsite ${method} ${path} failed (attempt ${attempt + 1}, ${response ? response.status : "no response"}); ` +
          `retrying in ${(waitMs / 1000).toFixed(2)}s`,
      );
      await sleep(waitMs, options.signal);
    }
  }

  private backoff(attempt: number): number {
    // Jitter spreads the retries of many agents hitting the same hiccup.
    return Math.min(BACKOFF_MS * 2 ** attempt * (1 + Math.random()), MAX_BACKOFF_MS);
  }

  toJSON(): Record<string, unknown> {
    return { root: this.root };
  }
}
