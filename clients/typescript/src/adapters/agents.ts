/**
 * An OpenAI Agents SDK (JavaScript) `Session` kept on a memsite server.
 *
 *     import { Agent, run } from "@openai/agents";
 *     import { MemsiteSession } from "memsite-client/agents";
 *
 *     const session = new MemsiteSession({ sessionId: "user-42" }); // MEMSITE_URL / MEMSITE_API_KEY
 *     await run(agent, "Hello", { session });
 *
 * The SDK's session id is the memsite session's `external_id`; the session is created by the
 * first write. Every item is stored twice over in one memsite message, as the Python adapter
 * (memory_client/adapters/openai_agents.py) does: as OpenAI chat fields, so the server's context,
 * compaction, search, fact extraction and dashboard understand it (a function call is an
 * assistant `tool_calls` entry, its result a `tool` message answering it, reasoning goes to
 * `reasoning_details`), and verbatim in the message's `meta`, so `getItems` gives back exactly
 * what was added. Consecutive model output items (reasoning, text, function calls) share one
 * assistant message, as OpenAI's chat format wants them; messages other clients wrote (no items
 * in `meta`) are read from their chat fields.
 *
 * `context: "managed"` makes `getItems` return the session's managed context (GET .../context/:
 * after a compaction, the summary and the messages after it) instead of the whole history, for
 * long conversations on a `managed_conversation` session. Messages served as stored come back
 * as their original items.
 */
import type { AgentInputItem, Session } from "@openai/agents";

import { contentText, isRecord, stableJson, toOpenAIMessage, type ChatMessage, type ContentPart } from "../chat.js";
import { MemsiteClient, type MemsiteClientOptions } from "../client.js";
import { MAX_LAST, NamedSession } from "../named-session.js";
import type { MessageInput, MemoryType, StoredMessage } from "../types.js";

/** Where a message's `meta` keeps the SDK items it stands for, verbatim. */
export const ITEMS_KEY = "openai_agents_js_items";
const INPUT_ROLES: Record<string, string> = { user: "user", system: "system", developer: "system" };

type Item = Record<string, any>;

// --- items -> stored messages ----------------------------------------------------------------------

function kind(item: Item): string {
  return String(item.type ?? ("role" in item ? "message" : "unknown"));
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

/** A content part of an item as a chat content part the server accepts; null when chat has none. */
function chatPart(part: unknown): ContentPart | null {
  if (!isRecord(part)) return null;
  switch (part.type) {
    case "input_text":
    case "output_text":
    case "text":
      return { type: "text", text: String(part.text ?? "") };
    case "refusal":
      return { type: "refusal", refusal: String(part.refusal ?? "") };
    case "input_image": {
      const image = part.image;
      if (typeof image === "string" && image) {
        return { type: "image_url", image_url: { url: image, detail: part.detail ?? "auto" } };
      }
      return isRecord(image) && image.id ? { type: "file", file: { file_id: image.id } } : null;
    }
    case "input_file": {
      const file: Record<string, unknown> = {};
      if (isRecord(part.file) && part.file.id) file.file_id = part.file.id;
      if (typeof part.file === "string" && part.file) file.file_data = part.file;
      if (part.filename) file.filename = part.filename;
      return file.file_id || file.file_data ? { type: "file", file } : null;
    }
    default:
      return null;
  }
}

/** An item's content in chat form: text stays text, parts become chat parts. */
function chatContent(content: unknown): ChatMessage["content"] {
  if (content === null || content === undefined) return null;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return null;
  const parts = content.map(chatPart).filter((part): part is ContentPart => part !== null);
  if (parts.every((part) => part.type === "text")) {
    return parts.map((part) => String(part.text)).join(""); // one plain string, as chat clients write it
  }
  return parts;
}

/** A reasoning item in the `reasoning_details` shape (OpenRouter's, as marsys stores it). */
function reasoningDetails(item: Item): Record<string, unknown>[] {
  const common = item.id ? { id: item.id } : {};
  const details: Record<string, unknown>[] = [];
  for (const part of item.content ?? []) details.push({ type: "reasoning.summary", summary: part.text ?? "", ...common });
  for (const part of item.rawContent ?? []) details.push({ type: "reasoning.text", text: part.text ?? "", ...common });
  const encrypted = item.providerData?.encryptedContent ?? item.providerData?.encrypted_content;
  if (encrypted) details.push({ type: "reasoning.encrypted", data: encrypted, ...common });
  return details.length ? details : [{ type: "reasoning.summary", summary: "", ...common }];
}

/** One assistant message for consecutive model output items: text, tool calls and reasoning. */
function modelOutputMessage(items: Item[]): MessageInput {
  const texts: ContentPart[] = [];
  const toolCalls: NonNullable<ChatMessage["tool_calls"]> = [];
  const reasoning: Record<string, unknown>[] = [];
  for (const item of items) {
    const type = kind(item);
    if (type === "message") {
      const said = chatContent(item.content);
      if (typeof said === "string") texts.push({ type: "text", text: said });
      else if (Array.isArray(said)) texts.push(...said);
    } else if (type === "function_call") {
      toolCalls.push({ id: item.callId, type: "function", function: { name: item.name, arguments: item.arguments ?? "" } });
    } else if (type === "reasoning") {
      reasoning.push(...reasoningDetails(item));
    }
  }
  let content = texts.length ? chatContent(texts) : null;
  if (content === null && !toolCalls.length) content = ""; // no null content without tool calls
  const message: MessageInput = { role: "assistant", content };
  if (toolCalls.length) message.tool_calls = toolCalls;
  if (reasoning.length) message.reasoning_details = reasoning;
  return message;
}

/** A function call's output as tool message content: text, or chat parts (images, files). */
function outputContent(output: unknown): ChatMessage["content"] {
  if (typeof output === "string") return output;
  const parts = Array.isArray(output) ? output : [output];
  const content = chatContent(parts);
  return content ? content : JSON.stringify(output);
}

function stored(message: MessageInput, items: Item[]): MessageInput {
  return { message_id: globalThis.crypto.randomUUID(), ...message, meta: { [ITEMS_KEY]: items } };
}

/**
 * Items as memsite message bodies (each with a new message_id and its items in `meta`). Input
 * messages (user, system, developer) and function call results are a message each; every run of
 * other items (the model's text, function calls, reasoning, hosted tool calls) is one assistant
 * message, so a turn's parallel calls are one `tool_calls` list, as chat wants.
 */
export function itemsToMessages(items: readonly AgentInputItem[]): MessageInput[] {
  const messages: MessageInput[] = [];
  let pending: Item[] = [];
  const flush = () => {
    if (pending.length) messages.push(stored(modelOutputMessage(pending), pending));
    pending = [];
  };
  for (const original of items) {
    const item = clone(original) as Item;
    const type = kind(item);
    if (type === "function_call_result") {
      flush();
      messages.push(stored({ role: "tool", tool_call_id: item.callId, content: outputContent(item.output) }, [item]));
    } else if (type === "message" && item.role in INPUT_ROLES) {
      flush();
      messages.push(stored({ role: INPUT_ROLES[item.role]!, content: chatContent(item.content) }, [item]));
    } else {
      pending.push(item);
    }
  }
  flush();
  return messages;
}

// --- stored messages -> items ----------------------------------------------------------------------

function inputPart(part: unknown): Item | null {
  if (!isRecord(part)) return null;
  if (part.type === "text") return { type: "input_text", text: String(part.text ?? "") };
  if (part.type === "image_url") {
    const image = isRecord(part.image_url) ? part.image_url : {};
    return { type: "input_image", image: image.url, detail: image.detail ?? "auto" };
  }
  if (part.type === "file" && isRecord(part.file)) {
    const file = part.file;
    const item: Item = { type: "input_file" };
    if (file.file_id) item.file = { id: file.file_id };
    else if (file.file_data) item.file = file.file_data;
    if (file.filename) item.filename = file.filename;
    return item;
  }
  return null;
}

function inputContent(message: Record<string, unknown>): unknown {
  const content = message.content;
  if (Array.isArray(content)) return content.map(inputPart).filter((part) => part !== null);
  return contentText(content);
}

/** Which function each call id named, so a tool result read from chat fields carries the name. */
export type CallNames = Map<string, string>;

function noteCalls(message: Record<string, unknown>, names: CallNames): void {
  for (const call of (message.tool_calls as ChatMessage["tool_calls"]) ?? []) names.set(call.id, call.function.name);
}

/** Items for a chat message written without them (by another client, or served by /context/). */
export function chatToItems(message: Record<string, unknown>, names: CallNames = new Map()): AgentInputItem[] {
  const role = message.role;
  noteCalls(message, names);
  if (role === "tool") {
    const callId = String(message.tool_call_id ?? "");
    return [
      {
        type: "function_call_result",
        callId,
        name: names.get(callId) ?? String(message.name ?? ""),
        status: "completed",
        output: { type: "text", text: contentText(message.content) },
      },
    ] as AgentInputItem[];
  }
  if (role === "user") return [{ role: "user", content: inputContent(message) }] as AgentInputItem[];
  if (role !== "assistant") return [{ role: "system", content: contentText(message.content) }] as AgentInputItem[];
  const items: Item[] = [];
  const text = contentText(message.content);
  const calls = (message.tool_calls as ChatMessage["tool_calls"]) ?? [];
  if (text || !calls.length) {
    items.push({ role: "assistant", status: "completed", content: [{ type: "output_text", text }] });
  }
  for (const call of calls) {
    items.push({
      type: "function_call",
      callId: call.id,
      name: call.function.name,
      arguments: call.function.arguments,
      status: "completed",
    });
  }
  return items as AgentInputItem[];
}

/** The items a stored message stands for: those kept in its meta, else read from its chat fields. */
export function messageItems(row: StoredMessage | Record<string, unknown>, names: CallNames = new Map()): AgentInputItem[] {
  noteCalls(row, names);
  const meta = row.meta;
  const kept = isRecord(meta) ? meta[ITEMS_KEY] : undefined;
  if (Array.isArray(kept) && kept.length) return clone(kept) as AgentInputItem[];
  return chatToItems(row, names);
}

/**
 * The managed context as items: a message served as stored gives back its original items.
 * `/context/` serves OpenAI messages without ids, so each is matched to the stored message it is
 * served as (same chat form); a summary, or a tool output shortened by truncation, matches none
 * and is read from its chat fields.
 */
export function contextItems(served: ChatMessage[], rows: StoredMessage[]): AgentInputItem[] {
  const byForm = new Map<string, StoredMessage[]>();
  const names: CallNames = new Map();
  for (const row of rows) {
    noteCalls(row, names);
    const key = stableJson(toOpenAIMessage(row));
    byForm.set(key, [...(byForm.get(key) ?? []), row]);
  }
  const items: AgentInputItem[] = [];
  for (const message of served) {
    const match = byForm.get(stableJson(message))?.shift();
    items.push(...(match ? messageItems(match, names) : chatToItems(message, names)));
  }
  return items;
}

/** Drop function call results whose call was cut off: no model takes an answer without its call. */
export function wholeToolPairs(items: AgentInputItem[]): AgentInputItem[] {
  const calls = new Set(items.filter((item) => kind(item as Item) === "function_call").map((item) => (item as Item).callId));
  return items.filter((item) => kind(item as Item) !== "function_call_result" || calls.has((item as Item).callId));
}

// --- the Session -----------------------------------------------------------------------------------

export interface MemsiteSessionOptions extends MemsiteClientOptions {
  /** The SDK's session id: the memsite session's external_id (unique within the team). */
  sessionId: string;
  /** A client to share (its connection settings win over baseUrl/apiKey). */
  client?: MemsiteClient;
  /** "history" (default): every item; "managed": the session's managed context. */
  context?: "history" | "managed";
  /** Settings of a session this creates (`managed_conversation` for compaction); an existing one keeps its own. */
  memoryType?: MemoryType;
  memoryConfig?: Record<string, unknown>;
  systemPrompt?: string;
  /** The default `limit` of getItems (default: all). */
  limit?: number;
}

/** The Agents SDK's `Session` over a memsite session (see the module comment). */
export class MemsiteSession implements Session {
  readonly client: MemsiteClient;
  readonly context: "history" | "managed";
  /** The context_id of the latest managed context getItems served (null before one). */
  lastContextId: string | null = null;
  private readonly named: NamedSession;
  private readonly defaultLimit: number | undefined;
  private writes: Promise<unknown> = Promise.resolve();

  constructor(options: MemsiteSessionOptions) {
    const { sessionId, client, context, memoryType, memoryConfig, systemPrompt, limit, ...connection } = options;
    if (context !== undefined && context !== "history" && context !== "managed") {
      throw new Error(`context must be "history" or "managed", got ${JSON.stringify(context)}`);
    }
    this.client = client ?? new MemsiteClient(connection);
    this.context = context ?? "history";
    this.defaultLimit = limit;
    const settings = Object.fromEntries(
      Object.entries({ memoryType, memoryConfig, systemPrompt }).filter(([, value]) => value !== undefined),
    );
    this.named = new NamedSession(this.client, sessionId, settings);
  }

  /** The memsite session's id (null until the first write creates it). */
  memsiteSessionId(): Promise<string | null> {
    return this.named.id(false);
  }

  /** A served context exactly as it was served (default: the latest managed context). */
  replayContext(contextId?: string): Promise<Record<string, unknown>> {
    const wanted = contextId ?? this.lastContextId;
    if (!wanted) throw new Error("No context served yet: getItems with context 'managed' names one.");
    return this.client.replayContext(wanted);
  }

  // --- the protocol ----------------------------------------------------------------------------------

  async getSessionId(): Promise<string> {
    return this.named.name;
  }

  /** The newest `limit` items (default: the session's limit, else all), oldest first. */
  async getItems(limit?: number): Promise<AgentInputItem[]> {
    const wanted = limit ?? this.defaultLimit;
    if (wanted !== undefined && wanted <= 0) return [];
    const sessionId = await this.named.id(false);
    if (sessionId === null) return [];
    if (this.context === "managed") return this.managedItems(sessionId, wanted);
    // Every stored message stands for at least one item: the newest `limit` messages hold the newest `limit` items.
    const rows = await this.named.rows(sessionId, wanted);
    const names: CallNames = new Map();
    const items = rows.flatMap((row) => messageItems(row, names));
    return wanted !== undefined ? items.slice(-wanted) : items;
  }

  /** Append the items, each in its chat form with itself kept alongside (see itemsToMessages). */
  addItems(items: AgentInputItem[]): Promise<void> {
    return this.serially(() => this.named.append(itemsToMessages(items)));
  }

  /** Remove and return the newest item (undefined when there is none). */
  popItem(): Promise<AgentInputItem | undefined> {
    return this.serially(() => this.pop());
  }

  /** Delete every message (POST .../reset/); the session, its name and settings stay. */
  clearSession(): Promise<void> {
    return this.serially(() => this.named.reset());
  }

  // --- the work ----------------------------------------------------------------------------------------

  private serially<T>(work: () => Promise<T>): Promise<T> {
    // popItem reads, then changes the newest message: one write at a time per session object.
    const next = this.writes.then(work, work);
    this.writes = next.catch(() => undefined);
    return next;
  }

  private async managedItems(sessionId: string, limit: number | undefined): Promise<AgentInputItem[]> {
    const served = await this.client.getContext(sessionId);
    // The items are the SDK's own type, with no room for an id: the id of what was served is
    // kept on the session, for replayContext().
    this.lastContextId = served.contextId;
    const rows = served.messages.length ? await this.named.rows(sessionId, Math.min(served.messages.length, MAX_LAST)) : [];
    const items = contextItems(served.messages, rows);
    return limit !== undefined ? wholeToolPairs(items.slice(-limit)) : items;
  }

  private async pop(): Promise<AgentInputItem | undefined> {
    const sessionId = await this.named.id(false);
    if (sessionId === null) return undefined;
    const [row] = await this.named.rows(sessionId, 1);
    if (!row) return undefined;
    const items = messageItems(row);
    if (items.length === 1) {
      await this.client.deleteMessage(sessionId, row.message_id);
    } else {
      // The newest message stands for several items (a model turn): it keeps the others.
      const rest = modelOutputMessage(items.slice(0, -1) as Item[]);
      await this.client.updateMessage(sessionId, row.message_id, {
        content: rest.content,
        tool_calls: rest.tool_calls ?? (null as never),
        reasoning_details: rest.reasoning_details ?? (null as never),
        meta: { ...(isRecord(row.meta) ? row.meta : {}), [ITEMS_KEY]: items.slice(0, -1) },
      });
    }
    return items[items.length - 1];
  }
}
