// Type-checked, never run (tsc --noEmit -p test/tsconfig.json): what a TypeScript project writes
// against the published declarations, through the package's own exports (memsite-client/...).
import Anthropic from "@anthropic-ai/sdk";
import type { MemoryToolHandlers } from "@anthropic-ai/sdk/helpers/beta/memory";
import { Agent, run, type AgentInputItem, type Session } from "@openai/agents";
import { generateText, streamText, type LanguageModel, type ToolSet } from "ai";

import {
  ApiError,
  MemsiteClient,
  NotFoundError,
  type ChatMessage,
  type Context,
  type MemoryFileResult,
  type SearchHit,
  type Session as MemsiteSessionRow,
} from "memsite-client";
import { MemsiteSession } from "memsite-client/agents";
import { memsiteTools } from "memsite-client/ai";
import { memsiteMemoryHandlers, memsiteMemoryTool } from "memsite-client/anthropic-memory";

export async function usesEveryEntryPoint(model: LanguageModel): Promise<void> {
  const memsite = new MemsiteClient({ baseUrl: "http://127.0.0.1:8000", timeoutMs: 5_000, logger: null });
  const row: MemsiteSessionRow = await memsite.createSession({ externalId: "user-42", memoryType: "managed_conversation" });
  const context: Context = await memsite.getContext(row.id, { maxTokens: 4000, recallKinds: ["fact"] });
  const messages: ChatMessage[] = context.messages;
  const contextId: string | null = context.contextId;
  const hits: SearchHit[] = (await memsite.search("login", { since: new Date(), limit: 5 })).results;
  const file: MemoryFileResult = await memsite.memoryFileCommand({ command: "view", path: "/memories" });
  try {
    await memsite.getSession("x");
  } catch (error) {
    if (error instanceof NotFoundError) console.log(error.error, error.detail, error.fields);
    if (error instanceof ApiError) console.log(error.status, error.retryAfter);
  }
  // @ts-expect-error a message needs a role
  await memsite.appendMessage(row.id, { content: "no role" });

  const session: Session = new MemsiteSession({ sessionId: "user-42", context: "managed" });
  const items: AgentInputItem[] = await session.getItems(10);
  await run(new Agent({ name: "weather" }), "Hello", { session });

  const tools: ToolSet = memsiteTools({ sessionId: row.id });
  await generateText({ model, tools, prompt: "When is the freeze?" });
  streamText({ model, tools: memsiteTools({ sessionId: row.id }), prompt: "When is the freeze?" });

  const handlers: MemoryToolHandlers = memsiteMemoryHandlers({ agent: "researcher" });
  await new Anthropic().beta.messages.toolRunner({
    model: "claude-sonnet-4-5",
    max_tokens: 1024,
    messages: [{ role: "user", content: "Remember this." }],
    tools: [memsiteMemoryTool({ client: memsite })],
  });
  console.log(messages, contextId, hits, file, items, handlers);
}
