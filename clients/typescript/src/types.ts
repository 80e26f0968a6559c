/**
 * The API's answers, typed. Resource objects come back with camelCase keys (`externalId`,
 * `createdAt`); messages stay in OpenAI's chat format (`tool_calls`, `tool_call_id`) so they can
 * go to an LLM as they are, and user data (metadata, memory documents, event payloads) is left as
 * it was written.
 */
import type { ChatMessage } from "./chat.js";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type MemoryType = "conversation_history" | "managed_conversation" | "kg";

export interface Session {
  id: string;
  externalId: string | null;
  systemPrompt: string;
  memoryType: MemoryType;
  metadata: Record<string, unknown>;
  memoryConfig?: Record<string, unknown> | null;
  messageCount?: number;
  lastSeq?: number;
  activeTokens?: number;
  createdAt: string;
  updatedAt?: string;
  [key: string]: unknown;
}

export interface SessionInput {
  externalId?: string;
  systemPrompt?: string;
  metadata?: Record<string, unknown>;
  memoryType?: MemoryType;
  /** marsys's ManagedMemoryConfig, for a managed_conversation session (partial: defaults fill the rest). */
  memoryConfig?: Record<string, unknown>;
  additionalState?: Record<string, unknown>;
  /** The session's recall setting: `{auto, k, kinds}`. */
  recall?: Record<string, unknown>;
}

export interface Page<T> {
  count?: number;
  next?: string | null;
  previous?: string | null;
  results: T[];
}

/** A message to append: OpenAI chat fields plus memsite's own (`meta`, `occurred_at`, ...). */
export interface MessageInput extends ChatMessage {
  message_id?: string;
  agent_calls?: unknown[];
  structured_data?: unknown;
  reasoning_details?: unknown[];
  images?: string[];
  send_from?: string;
  send_to?: string;
  meta?: Record<string, unknown>;
  occurred_at?: string;
}

/** A stored message as `GET .../messages/` lists it (chat fields plus seq, ids and times). */
export interface StoredMessage extends MessageInput {
  message_id: string;
  seq: number;
  token_count: number;
  created_at: string;
  occurred_at?: string;
}

/** What an append answers for each message it stored (or found stored under its message_id). */
export interface AppendedMessage {
  messageId: string;
  seq: number;
  tokenCount: number;
  [key: string]: unknown;
}

export interface MessagePage {
  results: StoredMessage[];
  nextAfter: number | null;
}

export interface ContextOptions {
  /** The newest N messages of the window. */
  last?: number;
  maxTokens?: number;
  /** Who reads (the usage ledger's agent); default the key's agent name. */
  agent?: string;
  /** Recall memories relevant to this text into the context. */
  recall?: string;
  recallK?: number;
  recallKinds?: SearchKind[];
  signal?: AbortSignal;
}

/** A served context: the messages to send to the LLM, named by `contextId` for its replay. */
export interface Context {
  contextId: string | null;
  messages: ChatMessage[];
  tokenCount: number;
  recall: Record<string, unknown> | null;
}

export type SearchKind = "message" | "fact" | "record" | "summary" | "experience" | "shared_memory" | "attachment" | string;

export interface SearchOptions {
  kinds?: SearchKind[];
  session?: string;
  agent?: string;
  role?: string;
  since?: string | Date;
  until?: string | Date;
  asOf?: string | Date;
  includeInvalidated?: boolean;
  limit?: number;
  explain?: boolean;
  signal?: AbortSignal;
}

export interface SearchHit {
  kind: SearchKind;
  id: string;
  itemId: string | number;
  text: string;
  snippet: string;
  source: Record<string, unknown>;
  occurredAt: string | null;
  invalidatedAt: string | null;
  score: number;
  [key: string]: unknown;
}

export interface SearchResult {
  results: SearchHit[];
  engines: Record<string, unknown>;
  pending: number;
}

export interface FactInput {
  subject: string;
  predicate: string;
  object: string;
  role?: string;
  session?: string;
  confidence?: number;
  replaces?: boolean;
}

export interface Fact {
  id: string;
  subject: string;
  predicate: string;
  object: string;
  role: string;
  session: string | null;
  confidence: number;
  timesSeen: number;
  validFrom: string;
  invalidatedAt: string | null;
  [key: string]: unknown;
}

export interface FactQuery {
  subject?: string;
  predicate?: string;
  object?: string;
  role?: string;
  session?: string;
  q?: string;
  asOf?: string | Date;
  includeInvalidated?: boolean;
  limit?: number;
  offset?: number;
}

export interface FactGraph {
  nodes: { id: string; label: string }[];
  edges: { id: string; source: string; target: string; predicate: string }[];
  truncated: boolean;
}

export interface ExtractionRun {
  id: string;
  status: "pending" | "running" | "done" | "failed" | "quarantined" | "discarded" | string;
  [key: string]: unknown;
}

export interface ExperienceSelectionInput {
  role: string;
  query: string;
  context?: string;
  sessionId?: string;
  roundId?: string;
  postId?: string;
}

export interface ExperienceSelection {
  candidates: unknown[];
  selected: { expId: string; what: string }[];
  promptText: string;
  messages: ChatMessage[];
  rawResponse: string;
  backend: string;
  model: string;
  latencyMs: number;
  logId: string | null;
  useExperience: boolean;
  skipped: string | null;
  [key: string]: unknown;
}

/** An agent-memory document (schema "agent-memory", version "1"): kept exactly as written. */
export interface AgentMemory {
  version?: string;
  schema?: string;
  discoveries?: Record<string, unknown>[];
  attempts?: Record<string, unknown>[];
  decisions?: Record<string, unknown>[];
  context?: Record<string, unknown> | null;
  history?: unknown[];
  [key: string]: unknown;
}

export interface MemoryEvent {
  id: number;
  kind: string;
  sessionId: string | null;
  /** The event's payload, as the feed shows it (e.g. a compaction's figures). */
  data: Record<string, unknown>;
  createdAt: string;
  [key: string]: unknown;
}

export interface EventsQuery {
  session?: string;
  after?: number;
  signal?: AbortSignal;
}

/** One command of Anthropic's memory tool, as memsite's memory files take it. */
export type MemoryFileCommand =
  | { command: "view"; path: string; view_range?: [number, number] | number[] }
  | { command: "create"; path: string; file_text: string }
  | { command: "str_replace"; path: string; old_str: string; new_str: string }
  | { command: "insert"; path: string; insert_line: number; insert_text: string }
  | { command: "delete"; path: string }
  | { command: "rename"; old_path: string; new_path: string; path?: string };

export interface MemoryFileResult {
  command: string;
  path: string;
  /** The text for the model. */
  output: string;
  version: number | null;
  [key: string]: unknown;
}
