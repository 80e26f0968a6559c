/**
 * Anthropic's memory tool (`memory_20250818`) kept in memsite's memory files.
 *
 *     import Anthropic from "@anthropic-ai/sdk";
 *     import { memsiteMemoryTool } from "memsite-client/anthropic-memory";
 *
 *     const runner = new Anthropic().beta.messages.toolRunner({
 *       model, max_tokens: 1024, messages, tools: [memsiteMemoryTool({ agent: "researcher" })],
 *     });
 *
 * `memsiteMemoryHandlers` implements the SDK's `MemoryToolHandlers` (view, create, str_replace,
 * insert, delete, rename): each command goes to `POST /api/v1/memory-files/command/` and the
 * server's `output` is the tool result. A refused command (no such file, a string that is not
 * unique ...) answers the model with the server's `detail` as an error result, so the model
 * can correct itself; other failures (an unreachable server, a revoked key) are thrown.
 */
import type { MemoryToolHandlers } from "@anthropic-ai/sdk/helpers/beta/memory";
import { betaMemoryTool } from "@anthropic-ai/sdk/helpers/beta/memory";

import { MemsiteClient, type MemsiteClientOptions } from "../client.js";
import { ApiError } from "../errors.js";
import type { MemoryFileCommand } from "../types.js";

export interface MemsiteMemoryOptions extends MemsiteClientOptions {
  client?: MemsiteClient;
  /** Whose memory files (sent as `agent`); default the team's shared files. */
  agent?: string;
}

/** Thrown back to the tool runner, which hands its message to the model as an error result. */
export class MemoryCommandRefused extends Error {
  constructor(readonly apiError: ApiError) {
    super(apiError.detail || apiError.error);
    this.name = "MemoryCommandRefused";
  }
}

const REFUSALS = new Set([400, 404, 409]);

/** The handlers betaMemoryTool() takes, each one memsite memory file command. */
export function memsiteMemoryHandlers(options: MemsiteMemoryOptions = {}): MemoryToolHandlers {
  const { client, agent, ...connection } = options;
  const memsite = client ?? new MemsiteClient(connection);

  const run = async (command: MemoryFileCommand): Promise<string> => {
    const body = agent === undefined ? command : { ...command, agent };
    try {
      return (await memsite.memoryFileCommand(body)).output;
    } catch (error) {
      if (error instanceof ApiError && error.status !== null && REFUSALS.has(error.status)) {
        throw new MemoryCommandRefused(error);
      }
      throw error;
    }
  };

  return {
    view: (command) => run({ command: "view", path: command.path, ...(command.view_range ? { view_range: command.view_range } : {}) }),
    create: (command) => run({ command: "create", path: command.path, file_text: command.file_text }),
    str_replace: (command) =>
      run({ command: "str_replace", path: command.path, old_str: command.old_str, new_str: command.new_str }),
    insert: (command) =>
      run({ command: "insert", path: command.path, insert_line: command.insert_line, insert_text: command.insert_text }),
    delete: (command) => run({ command: "delete", path: command.path }),
    rename: (command) => run({ command: "rename", old_path: command.old_path, new_path: command.new_path }),
  };
}

/** The SDK's memory tool, ready for `toolRunner({tools: [...]})`, backed by memsite. */
export function memsiteMemoryTool(
  options: MemsiteMemoryOptions = {},
  extraProps?: Parameters<typeof betaMemoryTool>[1],
): ReturnType<typeof betaMemoryTool> {
  return betaMemoryTool(memsiteMemoryHandlers(options), extraProps);
}
