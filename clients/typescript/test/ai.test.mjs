import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { generateText, simulateStreamingMiddleware, stepCountIs, streamText, wrapLanguageModel } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { memsiteTools } from "memsite-client/ai";

import { API_KEY, SERVER_URL, eventually, makeClient } from "./helpers.mjs";

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

function toolCall(toolCallId, toolName, input) {
  return {
    content: [{ type: "tool-call", toolCallId, toolName, input: JSON.stringify(input) }],
    finishReason: { unified: "tool-calls", raw: "tool_calls" },
    usage,
    warnings: [],
  };
}

function text(said) {
  return { content: [{ type: "text", text: said }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
}

describe("the Vercel AI SDK tools", () => {
  test("generateText remembers, recalls and reads the context through memsite over several steps", async () => {
    const memsite = makeClient();
    const session = await memsite.createSession({ systemPrompt: "You are a planner." });
    await memsite.appendMessage(session.id, { role: "user", content: "Plan the release of version 2." });
    const tools = memsiteTools({ sessionId: session.id, baseUrl: SERVER_URL, apiKey: API_KEY, agent: "Planner", searchSessionOnly: true, logger: null });
    const model = new MockLanguageModelV3({
      doGenerate: [
        toolCall("t1", "remember", { note: "The release freeze starts on Thursday." }),
        toolCall("t2", "recall", { query: "when does the release freeze start" }),
        toolCall("t3", "context", {}),
        text("The freeze starts on Thursday."),
      ],
    });
    // The model recalls only after the note is indexed (a worker does it, a moment after the write).
    const recalled = async () => {
      const found = await memsite.search("release freeze Thursday", { session: session.id });
      return found.results.some((hit) => hit.text === "The release freeze starts on Thursday.");
    };
    const original = model.doGenerate;
    model.doGenerate = async (options) => {
      if (model.doGenerateCalls.length === 1) await eventually(recalled);
      return original.call(model, options);
    };

    const result = await generateText({ model, tools, stopWhen: stepCountIs(6), prompt: "When does the freeze start?" });

    assert.equal(result.text, "The freeze starts on Thursday.");
    assert.equal(result.steps.length, 4);
    const outputs = result.steps.flatMap((step) => step.toolResults.map((done) => [done.toolName, done.output]));
    assert.deepEqual(outputs[0], ["remember", { remembered: true, messageId: outputs[0][1].messageId, seq: 2 }]);
    assert.equal(outputs[1][0], "recall");
    assert.equal(outputs[1][1].memories[0].text, "The release freeze starts on Thursday.");
    assert.equal(outputs[1][1].memories[0].session, session.id);
    assert.equal(outputs[2][0], "context");
    assert.deepEqual(outputs[2][1].messages, [
      { role: "system", content: "You are a planner." },
      { role: "user", content: "Plan the release of version 2." },
      { role: "assistant", content: "The release freeze starts on Thursday." },
    ]);
    assert.match(outputs[2][1].contextId, /^[0-9a-f-]{36}$/);
    // What the model was sent on its last step carries the three tool results.
    const last = model.doGenerateCalls.at(-1).prompt;
    assert.equal(last.filter((message) => message.role === "tool").length, 3);
    const stored = (await memsite.listMessages(session.id)).results.at(-1);
    assert.equal(stored.name, "Planner");
    assert.deepEqual(stored.meta, { remembered: true });
  });

  test("streamText runs the same tools while it streams", async () => {
    const memsite = makeClient();
    const session = await memsite.createSession();
    const tools = memsiteTools({ sessionId: session.id, client: memsite });
    const scripted = new MockLanguageModelV3({
      doGenerate: [toolCall("s1", "remember", { note: "Staging moved to eu-west-3." }), text("Saved.")],
    });
    const model = wrapLanguageModel({ model: scripted, middleware: simulateStreamingMiddleware() });

    const result = streamText({ model, tools, stopWhen: stepCountIs(3), prompt: "Note where staging is." });
    let streamed = "";
    for await (const delta of result.textStream) streamed += delta;

    assert.equal(streamed, "Saved.");
    const [first] = await result.steps;
    assert.equal(first.toolResults[0].output.remembered, true);
    const stored = (await memsite.listMessages(session.id)).results;
    assert.deepEqual(stored.map((row) => [row.role, row.name, row.content]), [["assistant", "memory", "Staging moved to eu-west-3."]]);
  });

  test("the tools describe their input as JSON Schema for any provider", () => {
    const tools = memsiteTools({ sessionId: globalThis.crypto.randomUUID(), baseUrl: SERVER_URL, apiKey: API_KEY });
    assert.deepEqual(Object.keys(tools), ["remember", "recall", "context"]);
    assert.deepEqual(tools.remember.inputSchema.jsonSchema.required, ["note"]);
    assert.deepEqual(tools.recall.inputSchema.jsonSchema.required, ["query"]);
    assert.ok(tools.context.description.length > 20);
  });
});
