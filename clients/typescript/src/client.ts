/**
 * The memsite client: one object per server and key, with a method per thing an agent does.
 *
 *     import { MemsiteClient } from "memsite-client";
 *     const memsite = new MemsiteClient(); // MEMSITE_URL / MEMSITE_API_KEY
 *     const session = await memsite.createSession({ systemPrompt: "You are helpful" });
 *     await memsite.appendMessage(session.id, { role: "user", content: "Hello" });
 *     const { messages, contextId } = await memsite.getContext(session.id, { maxTokens: 4000 });
 */
import type { ChatMessage } from "./chat.js";
import { isRecord } from "./chat.js";
import { MemsiteError, NotFoundError } from "./errors.js";
import { HttpApi, newIdempotencyKey, type Query, type TransportOptions } from "./transport.js";
import type {
  AgentMemory,
  AppendedMessage,
  Context,
  ContextOptions,
  EventsQuery,
  ExperienceSelection,
  ExperienceSelectionInput,
  ExtractionRun,
  Fact,
  FactGraph,
  FactInput,
  FactQuery,
  MemoryEvent,
  MemoryFileCommand,
  MemoryFileResult,
  MessageInput,
  MessagePage,
  Page,
  SearchHit,
  SearchOptions,
  SearchResult,
  Session,
  SessionInput,
  StoredMessage,
} from "./types.js";

export type MemsiteClientOptions = TransportOptions;

/** The largest batch one append request takes (the server's MEMSITE_MAX_MESSAGES_PER_REQUEST). */
export const MAX_BATCH = 500;
/** The largest page the message list answers. */
export const MESSAGE_PAGE = 1000;
const NOT_RECORDED_WAIT_MS = 10_000;
const NOT_RECORDED_POLL_MS = 250;

/** `externalId` -> `external_id`. */
export function snakeCase(name: string): string {
  return name.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/** `external_id` -> `externalId`. */
export function camelCase(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());
}

/**
 * An API object with camelCase keys. Only the object's own keys (and those of the nested objects
 * named in `nested`) change: values such as metadata, messages or documents stay as written.
 */
export function camelKeys<T>(value: unknown, nested: readonly string[] = []): T {
  if (!isRecord(value)) return value as T;
  const result: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    const name = camelCase(key);
    if (nested.includes(key)) {
      result[name] = Array.isArray(item) ? item.map((entry) => camelKeys(entry)) : camelKeys(item);
    } else {
      result[name] = item;
    }
  }
  return result as T;
}

/** Options as the API's snake_case body; undefined ones are left out (the server's defaults apply). */
function snakeBody(options: object, rename: Record<string, string> = {}): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(options)) {
    if (value === undefined || key === "signal") continue;
    body[rename[key] ?? snakeCase(key)] = value instanceof Date ? value.toISOString() : value;
  }
  return body;
}

function appended(row: unknown): AppendedMessage {
  return camelKeys<AppendedMessage>(row);
}

function segment(value: string): string {
  return encodeURIComponent(value);
}

export class MemsiteClient {
  /** The HTTP layer (retries, errors); `api.request()` reaches any route the client has no method for. */
  readonly api: HttpApi;

  constructor(options: MemsiteClientOptions = {}) {
    this.api = new HttpApi(options);
  }

  // --- sessions ---------------------------------------------------------------------------------

  /** Create a session (sent with an Idempotency-Key, so a retried create makes one session). */
  async createSession(input: SessionInput = {}): Promise<Session> {
    const row = await this.api.request("POST", "sessions/", {
      body: snakeBody(input),
      idempotencyKey: newIdempotencyKey(),
    });
    return camelKeys<Session>(row);
  }

  async getSession(sessionId: string): Promise<Session> {
    return camelKeys<Session>(await this.api.get(`sessions/${sessionId}/`));
  }

  /** The team's sessions, newest first: filter by externalId, memoryType, search ... */
  async listSessions(
    query: {
      externalId?: string;
      memoryType?: string;
      search?: string;
      createdAfter?: string;
      createdBefore?: string;
      limit?: number;
      offset?: number;
    } = {},
  ): Promise<Page<Session>> {
    const page = await this.api.get<Page<unknown>>("sessions/", snakeBody(query) as Query);
    return { ...page, results: page.results.map((row) => camelKeys<Session>(row)) };
  }

  /** The session named by `externalId` (unique per team), or null. */
  async findSession(externalId: string): Promise<Session | null> {
    const page = await this.listSessions({ externalId, limit: 1 });
    return page.results[0] ?? null;
  }

  async updateSession(
    sessionId: string,
    changes: Partial<Pick<SessionInput, "systemPrompt" | "metadata" | "memoryConfig" | "externalId" | "recall">>,
  ): Promise<Session> {
    return camelKeys<Session>(await this.api.request("PATCH", `sessions/${sessionId}/`, { body: snakeBody(changes) }));
  }

  /** Delete a session and everything that refers to it (needs an admin key). */
  async deleteSession(sessionId: string): Promise<void> {
    await this.api.request("DELETE", `sessions/${sessionId}/`);
  }

  /** Delete every message; the session, its prompt and settings stay. Answers how many went. */
  async resetSession(sessionId: string): Promise<{ deletedMessages: number }> {
    return camelKeys(await this.api.request("POST", `sessions/${sessionId}/reset/`));
  }

  // --- messages ---------------------------------------------------------------------------------

  /**
   * Append one message (OpenAI chat format plus memsite's fields). It gets a client-chosen
   * `message_id` and the request an Idempotency-Key, so a retry never stores it twice.
   */
  async appendMessage(
    sessionId: string,
    message: MessageInput,
    options: { idempotencyKey?: string } = {},
  ): Promise<AppendedMessage> {
    const body = { message_id: globalThis.crypto.randomUUID(), ...message };
    const row = await this.api.request("POST", `sessions/${sessionId}/messages/`, {
      body,
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
    });
    return appended(row);
  }

  /** Append messages in order, atomically (all or none; at most MAX_BATCH per call). */
  async appendMessages(
    sessionId: string,
    messages: MessageInput[],
    options: { idempotencyKey?: string } = {},
  ): Promise<AppendedMessage[]> {
    if (messages.length === 0) return [];
    if (messages.length > MAX_BATCH) {
      throw new MemsiteError(`At most ${MAX_BATCH} messages per batch (got ${messages.length}): split them.`);
    }
    const body = { messages: messages.map((message) => ({ message_id: globalThis.crypto.randomUUID(), ...message })) };
    const answer = await this.api.request<{ messages: unknown[] }>("POST", `sessions/${sessionId}/messages/`, {
      body,
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
    });
    return answer.messages.map(appended);
  }

  /** One page of stored messages in seq order: the newest `last`, or `after`/`limit` cursor pages. */
  async listMessages(
    sessionId: string,
    query: { last?: number; after?: number | null; limit?: number; role?: string } = {},
  ): Promise<MessagePage> {
    const page = await this.api.get<{ results: StoredMessage[]; next_after: number | null }>(
      `sessions/${sessionId}/messages/`,
      snakeBody(query) as Query,
    );
    return { results: page.results, nextAfter: page.next_after };
  }

  /** Every stored message of the session, page by page, oldest first. */
  async *iterMessages(sessionId: string, query: { role?: string } = {}): AsyncGenerator<StoredMessage> {
    let after: number | null = null;
    do {
      const page = await this.listMessages(sessionId, { ...query, after, limit: MESSAGE_PAGE });
      yield* page.results;
      after = page.nextAfter;
    } while (after !== null);
  }

  async getMessage(sessionId: string, messageId: string): Promise<StoredMessage> {
    return this.api.get<StoredMessage>(`sessions/${sessionId}/messages/${messageId}/`);
  }

  /** Change a stored message (not retried: its outcome would be unknown). */
  async updateMessage(sessionId: string, messageId: string, changes: Partial<MessageInput>): Promise<StoredMessage> {
    return this.api.request<StoredMessage>("PATCH", `sessions/${sessionId}/messages/${messageId}/`, { body: changes });
  }

  async deleteMessage(sessionId: string, messageId: string): Promise<void> {
    await this.api.request("DELETE", `sessions/${sessionId}/messages/${messageId}/`);
  }

  // --- the context --------------------------------------------------------------------------------

  /**
   * What to send to the LLM: the system prompt first, then the session's window (its managed
   * context for a managed session), exactly OpenAI's format; `recall` adds relevant memories.
   */
  async getContext(sessionId: string, options: ContextOptions = {}): Promise<Context> {
    const { recallKinds, signal, ...rest } = options;
    const query = snakeBody(rest) as Query;
    if (recallKinds) query.recall_kinds = recallKinds;
    const answer = await this.api.get<Record<string, unknown>>(`sessions/${sessionId}/context/`, query, { signal });
    return {
      contextId: (answer.context_id as string | undefined) ?? null,
      messages: answer.messages as ChatMessage[],
      tokenCount: answer.token_count as number,
      recall: answer.recall ? camelKeys<Record<string, unknown>>(answer.recall, ["memories"]) : null,
    };
  }

  /**
   * A served context exactly as it was served (messages, parameters, recalled memories, summary,
   * tokens by part), whatever happened to the session since. Asked for right after the read, it
   * waits up to `waitMs` for the server to write it down.
   */
  async replayContext(contextId: string, options: { waitMs?: number } = {}): Promise<Record<string, unknown>> {
    const deadline = Date.now() + (options.waitMs ?? NOT_RECORDED_WAIT_MS);
    for (;;) {
      try {
        return camelKeys(await this.api.get(`contexts/${contextId}/`));
      } catch (error) {
        if (!(error instanceof NotFoundError) || error.error !== "not_recorded_yet" || Date.now() >= deadline) {
          throw error;
        }
      }
      await new Promise((resolve) => setTimeout(resolve, NOT_RECORDED_POLL_MS));
    }
  }

  /** Queue a compaction now (a managed session); answers the run. */
  async compact(sessionId: string): Promise<Record<string, unknown>> {
    return camelKeys(await this.api.request("POST", `sessions/${sessionId}/compact/`));
  }

  /** The compaction ledger of a session, newest first. */
  async listCompactions(sessionId: string): Promise<Record<string, unknown>[]> {
    const answer = await this.api.get<Page<unknown> | unknown[]>(`sessions/${sessionId}/compactions/`);
    const rows = Array.isArray(answer) ? answer : answer.results;
    return rows.map((row) => camelKeys<Record<string, unknown>>(row));
  }

  // --- search -------------------------------------------------------------------------------------

  /** Hybrid search over the team's memory, best first (retried like a GET: it changes nothing). */
  async search(query: string, options: SearchOptions = {}): Promise<SearchResult> {
    const { signal, since, until, ...rest } = options;
    const body = snakeBody({ query, ...rest });
    if (since !== undefined) body.from = since instanceof Date ? since.toISOString() : since;
    if (until !== undefined) body.to = until instanceof Date ? until.toISOString() : until;
    const answer = await this.api.request<Record<string, unknown>>("POST", "search/", {
      body,
      idempotent: true,
      signal,
    });
    return {
      results: (answer.results as unknown[]).map((hit) => camelKeys<SearchHit>(hit, ["source"])),
      engines: (answer.engines as Record<string, unknown>) ?? {},
      pending: (answer.pending as number) ?? 0,
    };
  }

  // --- facts --------------------------------------------------------------------------------------

  /** Add a fact; the same live fact again counts `timesSeen` instead of a second row. */
  async addFact(fact: FactInput): Promise<Fact> {
    return camelKeys<Fact>(await this.api.request("POST", "facts/", { body: snakeBody(fact) }));
  }

  async listFacts(query: FactQuery = {}): Promise<Page<Fact>> {
    const page = await this.api.get<Page<unknown>>("facts/", snakeBody(query) as Query);
    return { ...page, results: page.results.map((row) => camelKeys<Fact>(row)) };
  }

  async getFact(factId: string): Promise<Fact> {
    return camelKeys<Fact>(await this.api.get(`facts/${factId}/`));
  }

  /** The entity's neighbourhood in the knowledge graph (depth 1..3). */
  async factGraph(entity: string, options: { depth?: number; asOf?: string | Date } = {}): Promise<FactGraph> {
    return this.api.get<FactGraph>("facts/graph/", snakeBody({ entity, ...options }) as Query);
  }

  /** Queue a fact extraction over the session's messages (fromSeq..toSeq) or over a text. */
  async extractFacts(
    sessionId: string,
    input: { fromSeq?: number; toSeq?: number } | { text: string; role?: string } = {},
  ): Promise<ExtractionRun> {
    return camelKeys<ExtractionRun>(
      await this.api.request("POST", `sessions/${sessionId}/extract-facts/`, { body: snakeBody(input) }),
    );
  }

  async getFactExtraction(runId: string): Promise<ExtractionRun> {
    return camelKeys<ExtractionRun>(await this.api.get(`fact-extractions/${runId}/`));
  }

  // --- experiences ----------------------------------------------------------------------------------

  /** The team's handcrafted experiences the LLM selects for this role and query. */
  async selectExperiences(input: ExperienceSelectionInput): Promise<ExperienceSelection> {
    const answer = await this.api.request("POST", "experiences/select/", { body: snakeBody(input) });
    return camelKeys<ExperienceSelection>(answer, ["selected"]);
  }

  // --- agent records ------------------------------------------------------------------------------

  private recordPath(sessionId: string, agent: string, rest = ""): string {
    return `sessions/${sessionId}/agents/${segment(agent)}/memory/${rest}`;
  }

  /** The agent's memory document (discoveries, attempts, decisions, context), as written. */
  async getAgentMemory(sessionId: string, agent: string): Promise<AgentMemory> {
    return this.api.get<AgentMemory>(this.recordPath(sessionId, agent));
  }

  /** Replace the whole document (archived entries are kept). */
  async putAgentMemory(sessionId: string, agent: string, document: AgentMemory): Promise<AgentMemory> {
    return this.api.request<AgentMemory>("PUT", this.recordPath(sessionId, agent), { body: document });
  }

  /** Append a discovery; the server assigns its id (`discovery-001`) and timestamp. */
  async addDiscovery(sessionId: string, agent: string, entry: Record<string, unknown>): Promise<Record<string, unknown>> {
    return this.api.request("POST", this.recordPath(sessionId, agent, "discoveries/"), { body: entry });
  }

  /** Record an attempt (without `result` it is in progress). */
  async addAttempt(sessionId: string, agent: string, entry: Record<string, unknown>): Promise<Record<string, unknown>> {
    return this.api.request("POST", this.recordPath(sessionId, agent, "attempts/"), { body: entry });
  }

  /** Update an attempt in progress, or conclude it with `result` success/failure/partial. */
  async updateAttempt(
    sessionId: string,
    agent: string,
    attemptId: string,
    changes: Record<string, unknown>,
  ): Promise<Record<string, unknown>> {
    return this.api.request("PATCH", this.recordPath(sessionId, agent, `attempts/${segment(attemptId)}/`), {
      body: changes,
    });
  }

  async addDecision(sessionId: string, agent: string, entry: Record<string, unknown>): Promise<Record<string, unknown>> {
    return this.api.request("POST", this.recordPath(sessionId, agent, "decisions/"), { body: entry });
  }

  /** The record's `context` section (null while the agent has written none). */
  async getAgentContext(sessionId: string, agent: string): Promise<Record<string, unknown> | null> {
    return this.api.get(this.recordPath(sessionId, agent, "context/"));
  }

  /** Replace the `context` section (`replace: true`) or only the top-level keys given. */
  async setAgentContext(
    sessionId: string,
    agent: string,
    context: Record<string, unknown>,
    options: { replace?: boolean } = {},
  ): Promise<Record<string, unknown>> {
    return this.api.request(options.replace ? "PUT" : "PATCH", this.recordPath(sessionId, agent, "context/"), {
      body: context,
    });
  }

  /** The record as prompt text (newest discoveries, recent failures, step, blockers). */
  async agentMemoryPrompt(sessionId: string, agent: string): Promise<string> {
    return this.api.get<string>(this.recordPath(sessionId, agent, "prompt/"), { format: "text" }, {
      headers: { Accept: "text/plain" },
    });
  }

  // --- events ---------------------------------------------------------------------------------------

  /** The memory event feed (resets, compactions, facts ...), oldest first after `after`. */
  async listEvents(query: EventsQuery = {}): Promise<MemoryEvent[]> {
    const { signal, ...rest } = query;
    const answer = await this.api.get<Page<unknown> | unknown[]>("events/", snakeBody(rest) as Query, { signal });
    const rows = Array.isArray(answer) ? answer : answer.results;
    return rows.map((row) => camelKeys<MemoryEvent>(row));
  }

  /**
   * The feed live (server-sent events): yields each event as it commits, until the server ends
   * the stream (after MEMSITE_SSE_MAX_SECONDS) or `signal` aborts. Resume with `after: lastId`.
   */
  async *streamEvents(query: EventsQuery = {}): AsyncGenerator<MemoryEvent> {
    const { signal, ...rest } = query;
    const response = await this.api.request<Response>("GET", "events/stream/", {
      query: snakeBody(rest) as Query,
      headers: { Accept: "text/event-stream" },
      idempotent: true,
      raw: true,
      signal,
    });
    if (!response.body) return;
    const decoder = new TextDecoder();
    let buffer = "";
    let data: string[] = [];
    const reader = response.body.getReader();
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let newline: number;
        while ((newline = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, newline).replace(/\r$/, "");
          buffer = buffer.slice(newline + 1);
          if (line === "") {
            if (data.length) yield camelKeys<MemoryEvent>(JSON.parse(data.join("\n")));
            data = [];
          } else if (line.startsWith("data:")) {
            data.push(line.slice(5).replace(/^ /, ""));
          }
        }
      }
    } finally {
      await reader.cancel().catch(() => undefined);
    }
  }

  // --- memory files -------------------------------------------------------------------------------

  /**
   * One command of Anthropic's memory tool (view, create, str_replace, insert, delete, rename)
   * on the team's memory files; `output` is the text for the model.
   */
  async memoryFileCommand(command: MemoryFileCommand & { agent?: string }): Promise<MemoryFileResult> {
    return this.api.request<MemoryFileResult>("POST", "memory-files/command/", { body: command });
  }

  toJSON(): Record<string, unknown> {
    return { api: this.api.toJSON() };
  }
}
