import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import { NotFoundError } from "memsite-client";
import { memsiteMemoryHandlers, memsiteMemoryTool } from "memsite-client/anthropic-memory";

import { API_KEY, SERVER_URL, makeClient, unique } from "./helpers.mjs";

/** A stand-in for the Messages API: answers each request with the next scripted content. */
class ScriptedClaude {
  requests = [];

  constructor(turns) {
    this.turns = [...turns];
  }

  async start() {
    this.server = createServer(async (request, response) => {
      const chunks = [];
      for await (const chunk of request) chunks.push(chunk);
      this.requests.push(JSON.parse(Buffer.concat(chunks).toString()));
      const content = this.turns.shift() ?? [{ type: "text", text: "(the script ran out)" }];
      const toolUse = content.some((block) => block.type === "tool_use");
      response.writeHead(200, { "Content-Type": "application/json" });
      response.end(
        JSON.stringify({
          id: `msg_${this.requests.length}`,
          type: "message",
          role: "assistant",
          model: "claude-scripted",
          content,
          stop_reason: toolUse ? "tool_use" : "end_turn",
          stop_sequence: null,
          usage: { input_tokens: 10, output_tokens: 5 },
        }),
      );
    });
    await new Promise((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
  }

  stop() {
    return new Promise((resolve) => this.server.close(resolve));
  }
}

const use = (id, input) => [{ type: "tool_use", id, name: "memory", input }];

describe("the Anthropic memory tool", () => {
  const agent = unique("researcher");
  const path = `/memories/${unique("notes")}.md`;
  const claude = new ScriptedClaude([
    use("tu_1", { command: "create", path, file_text: "Ada prefers tea.\n" }),
    use("tu_2", { command: "str_replace", path, old_str: "tea", new_str: "coffee" }),
    use("tu_3", { command: "view", path }),
    use("tu_4", { command: "str_replace", path, old_str: "milk", new_str: "oat milk" }),
    [{ type: "text", text: "Ada prefers coffee." }],
  ]);
  before(() => claude.start());
  after(() => claude.stop());

  test("the SDK's tool runner keeps the model's memory files in memsite over several turns", async () => {
    const anthropic = new Anthropic({ apiKey: "sk-ant-scripted", baseURL: claude.url, maxRetries: 0 });
    const runner = anthropic.beta.messages.toolRunner({
      model: "claude-scripted",
      max_tokens: 1024,
      messages: [{ role: "user", content: "Remember what Ada drinks." }],
      tools: [memsiteMemoryTool({ agent, baseUrl: SERVER_URL, apiKey: API_KEY, logger: null })],
    });

    const final = await runner.runUntilDone();

    assert.equal(final.content[0].text, "Ada prefers coffee.");
    assert.equal(claude.requests.length, 5);
    assert.deepEqual(claude.requests[0].tools.map((tool) => [tool.type, tool.name]), [["memory_20250818", "memory"]]);
    const results = claude.requests.slice(1).map((body) => body.messages.at(-1).content[0]);
    assert.deepEqual(results.map((result) => result.tool_use_id), ["tu_1", "tu_2", "tu_3", "tu_4"]);
    assert.ok(results.slice(0, 3).every((result) => !result.is_error));
    assert.match(JSON.stringify(results[2].content), /Ada prefers coffee\./);
    assert.equal(results[3].is_error, true); // refused: the model reads why and can correct itself
    assert.match(JSON.stringify(results[3].content), /milk/);

    const memsite = makeClient();
    const seen = await memsite.memoryFileCommand({ command: "view", path, agent });
    assert.match(seen.output, /Ada prefers coffee\./);
    assert.equal(seen.version, 2);
    const shared = await memsite.memoryFileCommand({ command: "view", path }).catch((error) => error);
    assert.ok(shared instanceof NotFoundError); // the agent's own files, not the team's shared ones
  });

  test("every command of the handlers goes to memsite", async () => {
    const handlers = memsiteMemoryHandlers({ client: makeClient(), agent });
    const file = `/memories/${unique("plan")}.md`;
    const moved = `/memories/${unique("moved")}.md`;

    await handlers.create({ command: "create", path: file, file_text: "one\nthree\n" });
    await handlers.insert({ command: "insert", path: file, insert_line: 1, insert_text: "two\n" });
    const lines = await handlers.view({ command: "view", path: file, view_range: [1, 2] });
    assert.match(lines, /one/);
    assert.match(lines, /two/);
    assert.doesNotMatch(lines, /three/);
    await handlers.rename({ command: "rename", old_path: file, new_path: moved });
    assert.match(await handlers.view({ command: "view", path: "/memories" }), new RegExp(moved.split("/").at(-1)));
    await handlers.delete({ command: "delete", path: moved });
    await assert.rejects(handlers.view({ command: "view", path: moved }), { name: "MemoryCommandRefused" });
  });
});
