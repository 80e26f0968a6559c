/**
 * Vercel AI SDK tools that give a model memsite memory: pass them to `generateText` or
 * `streamText` as they are.
 *
 *     import { generateText, stepCountIs } from "ai";
 *     import { memsiteTools } from "memsite-client/ai";
 *
 *     const tools = memsiteTools({ sessionId }); // MEMSITE_URL / MEMSITE_API_KEY
 *     await generateText({ model, tools, stopWhen: stepCountIs(5), prompt: "..." });
 *
 * - `remember`: keep a note in the session (a message search and the context see);
 * - `recall`: search the team's memory (messages, facts, records, summaries ...), best first;
 * - `context`: the session's context as the server serves it (its managed context for a managed
 *   session, with relevant memories recalled into it when asked).
 *
 * The schemas are plain JSON Schema (the SDK's `jsonSchema`): no zod needed.
 */
import { jsonSchema, tool } from "ai";

import { contentText } from "../chat.js";
import { MemsiteClient, type MemsiteClientOptions } from "../client.js";
import type { SearchKind } from "../types.js";

export interface MemsiteToolsOptions extends MemsiteClientOptions {
  /** The memsite session (its id, a UUID) the tools remember into and read the context of. */
  sessionId: string;
  client?: MemsiteClient;
  /** Who writes the notes (the message's `name` and `send_from`); default "memory". */
  agent?: string;
  /** The kinds recall searches (default: every kind). */
  kinds?: SearchKind[];
  /** Search only this session (default: the whole team's memory). */
  searchSessionOnly?: boolean;
  /** The most hits recall returns (default 5). */
  recallLimit?: number;
  /** The token budget of the context tool (default 4000). */
  contextMaxTokens?: number;
}

export interface RememberInput {
  note: string;
}

export interface RecallInput {
  query: string;
  limit?: number;
}

export interface ContextInput {
  recall?: string;
}

export interface RememberOutput {
  remembered: true;
  messageId: string;
  seq: number;
}

export interface RecallOutput {
  memories: { kind: string; text: string; occurredAt: string | null; score: number; session: unknown }[];
}

export interface ContextOutput {
  contextId: string | null;
  tokenCount: number;
  messages: { role: string; content: string }[];
}

/** The three tools, keyed by the names the model sees. */
export function memsiteTools(options: MemsiteToolsOptions) {
  const { sessionId, client, agent, kinds, searchSessionOnly, recallLimit, contextMaxTokens, ...connection } = options;
  const memsite = client ?? new MemsiteClient(connection);
  const writer = agent ?? "memory";

  return {
    remember: tool({
      description:
        "Save a note to long-term memory: a fact, a decision, a preference or a result worth " +
        "recalling in a later turn or conversation.",
      inputSchema: jsonSchema<RememberInput>({
        type: "object",
        properties: { note: { type: "string", description: "What to remember, in one or two sentences." } },
        required: ["note"],
        additionalProperties: false,
      }),
      execute: async ({ note }: RememberInput): Promise<RememberOutput> => {
        const stored = await memsite.appendMessage(sessionId, {
          role: "assistant",
          name: writer,
          content: note,
          send_from: writer,
          meta: { remembered: true },
        });
        return { remembered: true, messageId: stored.messageId, seq: stored.seq };
      },
    }),
    recall: tool({
      description: "Search long-term memory for what is relevant to a question; the best matches first.",
      inputSchema: jsonSchema<RecallInput>({
        type: "object",
        properties: {
          query: { type: "string", description: "What to look for, in words." },
          limit: { type: "integer", minimum: 1, maximum: 50, description: "How many memories at most." },
        },
        required: ["query"],
        additionalProperties: false,
      }),
      execute: async ({ query, limit }: RecallInput): Promise<RecallOutput> => {
        const found = await memsite.search(query, {
          kinds,
          session: searchSessionOnly ? sessionId : undefined,
          limit: limit ?? recallLimit ?? 5,
        });
        return {
          memories: found.results.map((hit) => ({
            kind: hit.kind,
            text: hit.text,
            occurredAt: hit.occurredAt,
            score: hit.score,
            session: hit.source.session ?? null,
          })),
        };
      },
    }),
    context: tool({
      description:
        "Read this conversation's memory as the memory server serves it: the summary of what " +
        "came before and the newest messages, optionally with memories relevant to a question.",
      inputSchema: jsonSchema<ContextInput>({
        type: "object",
        properties: { recall: { type: "string", description: "A question to recall relevant memories for." } },
        additionalProperties: false,
      }),
      execute: async ({ recall }: ContextInput): Promise<ContextOutput> => {
        const served = await memsite.getContext(sessionId, {
          maxTokens: contextMaxTokens ?? 4000,
          recall: recall || undefined,
        });
        return {
          contextId: served.contextId,
          tokenCount: served.tokenCount,
          messages: served.messages.map((message) => ({ role: message.role, content: contentText(message.content) })),
        };
      },
    }),
  };
}
