import assert from "node:assert/strict";
import { createRequire } from "node:module";
import { describe, test } from "node:test";

import { MemsiteClient } from "memsite-client";

import { ADMIN_KEY, SERVER_URL, eventually, makeClient, unique } from "./helpers.mjs";

const weatherCall = {
  id: "call_1",
  type: "function",
  function: { name: "get_weather", arguments: JSON.stringify({ city: "Oslo" }) },
};

describe("the client", () => {
  test("creates, finds, changes and lists sessions with camelCase fields", async () => {
    const memsite = makeClient();
    const name = unique("sessions");
    const created = await memsite.createSession({ externalId: name, systemPrompt: "You are terse.", metadata: { team: "qa" } });

    assert.equal(created.externalId, name);
    assert.equal(created.systemPrompt, "You are terse.");
    assert.equal(created.memoryType, "conversation_history");
    assert.deepEqual(created.metadata, { team: "qa" });
    assert.equal((await memsite.findSession(name)).id, created.id);
    assert.equal(await memsite.findSession(unique("nobody")), null);
    const changed = await memsite.updateSession(created.id, { systemPrompt: "You are kind." });
    assert.equal(changed.systemPrompt, "You are kind.");
    assert.equal((await memsite.getSession(created.id)).systemPrompt, "You are kind.");
    const listed = await memsite.listSessions({ externalId: name });
    assert.deepEqual(listed.results.map((session) => session.id), [created.id]);
  });

  test("appends a tool turn in OpenAI's chat format and serves it back as the context, with its id", async () => {
    const memsite = makeClient();
    const session = await memsite.createSession({ systemPrompt: "You are a weather assistant." });
    const first = await memsite.appendMessage(session.id, { role: "user", content: "What is the weather in Oslo?" });
    const batch = await memsite.appendMessages(session.id, [
      { role: "assistant", content: null, tool_calls: [weatherCall] },
      { role: "tool", tool_call_id: "call_1", content: JSON.stringify({ temp_c: 4, sky: "rain" }) },
      { role: "assistant", content: "It is 4 °C and raining in Oslo." },
    ]);

    assert.equal(first.seq, 1);
    assert.deepEqual(batch.map((row) => row.seq), [2, 3, 4]);
    assert.ok(batch.every((row) => typeof row.messageId === "string" && row.tokenCount > 0));
    const context = await memsite.getContext(session.id, { maxTokens: 4000 });
    assert.deepEqual(context.messages, [
      { role: "system", content: "You are a weather assistant." },
      { role: "user", content: "What is the weather in Oslo?" },
      { role: "assistant", content: null, tool_calls: [weatherCall] },
      { role: "tool", content: '{"temp_c":4,"sky":"rain"}', tool_call_id: "call_1" },
      { role: "assistant", content: "It is 4 °C and raining in Oslo." },
    ]);
    assert.ok(context.tokenCount > 0);
    assert.match(context.contextId, /^[0-9a-f-]{36}$/);
    assert.deepEqual((await memsite.getContext(session.id, { last: 1 })).messages.at(-1).content, "It is 4 °C and raining in Oslo.");

    await memsite.appendMessage(session.id, { role: "user", content: "And tomorrow?" });
    const replay = await memsite.replayContext(context.contextId);
    assert.deepEqual(replay.messages, context.messages); // as served, whatever came after
    assert.equal(replay.tokenCount, context.tokenCount);
  });

  test("a write sent again with its Idempotency-Key is stored once", async () => {
    const memsite = makeClient();
    const session = await memsite.createSession();
    const key = globalThis.crypto.randomUUID();
    const message = { message_id: globalThis.crypto.randomUUID(), role: "user", content: "once" };

    const first = await memsite.appendMessage(session.id, message, { idempotencyKey: key });
    const again = await memsite.appendMessage(session.id, message, { idempotencyKey: key });

    assert.deepEqual(again, first);
    assert.equal((await memsite.listMessages(session.id)).results.length, 1);
  });

  test("lists, reads, changes and deletes stored messages, and pages through them", async () => {
    const memsite = makeClient();
    const session = await memsite.createSession();
    const rows = await memsite.appendMessages(
      session.id,
      Array.from({ length: 5 }, (_, index) => ({ role: index % 2 ? "assistant" : "user", content: `turn ${index}` })),
    );

    const newest = await memsite.listMessages(session.id, { last: 2 });
    assert.deepEqual(newest.results.map((row) => row.content), ["turn 3", "turn 4"]);
    const page = await memsite.listMessages(session.id, { after: 0, limit: 2 });
    assert.deepEqual([page.results.length, page.nextAfter], [2, 2]);
    const all = [];
    for await (const row of memsite.iterMessages(session.id)) all.push(row.content);
    assert.deepEqual(all, ["turn 0", "turn 1", "turn 2", "turn 3", "turn 4"]);
    const users = (await memsite.listMessages(session.id, { role: "user" })).results;
    assert.equal(users.length, 3);

    const edited = await memsite.updateMessage(session.id, rows[0].messageId, { content: "turn zero" });
    assert.equal(edited.content, "turn zero");
    assert.equal((await memsite.getMessage(session.id, rows[0].messageId)).content, "turn zero");
    await memsite.deleteMessage(session.id, rows[4].messageId);
    assert.equal((await memsite.listMessages(session.id)).results.length, 4);
    const reset = await memsite.resetSession(session.id);
    assert.equal(typeof reset.deletedMessages, "number");
    assert.equal((await memsite.listMessages(session.id)).results.length, 0);
  });

  test("searches the team's memory and recalls it into the context", async () => {
    const memsite = makeClient();
    const session = await memsite.createSession();
    await memsite.appendMessages(session.id, [
      { role: "user", content: "The staging database password rotates every Tuesday." },
      { role: "assistant", content: "Noted: the rotation is weekly." },
    ]);

    const found = await eventually(async () => {
      const answer = await memsite.search("when does the staging password rotate", { session: session.id, explain: true });
      return answer.results.length ? answer : null;
    });
    const hit = found.results[0];
    assert.equal(hit.kind, "message");
    assert.equal(hit.text, "The staging database password rotates every Tuesday.");
    assert.equal(hit.source.seq, 1); // nested keys are camelCase too
    assert.equal(hit.source.messageId !== undefined, true);
    assert.ok(hit.score > 0);
    assert.ok(hit.itemId !== undefined && hit.occurredAt !== undefined);

    const fresh = await memsite.createSession();
    await memsite.appendMessage(fresh.id, { role: "user", content: "Remind me about passwords." });
    const context = await memsite.getContext(fresh.id, { recall: "staging password rotation", recallK: 3, recallKinds: ["message"] });
    assert.equal(context.messages[0].role, "system");
    assert.match(context.messages[0].content, /rotates every Tuesday/);
    assert.ok(context.recall.memories.length >= 1);
  });

  test("keeps facts: adds, counts a repeat, lists and walks the graph", async () => {
    const memsite = makeClient();
    const subject = unique("ada");
    const fact = await memsite.addFact({ role: "user", subject, predicate: "lives_in", object: "Oslo" });
    const again = await memsite.addFact({ role: "user", subject, predicate: "lives_in", object: "Oslo" });

    assert.equal(again.id, fact.id);
    assert.equal(again.timesSeen, 2);
    assert.deepEqual((await memsite.listFacts({ subject })).results.map((row) => row.object), ["Oslo"]);
    assert.equal((await memsite.getFact(fact.id)).predicate, "lives_in");
    const graph = await memsite.factGraph(subject);
    assert.deepEqual(graph.edges.map((edge) => edge.predicate), ["lives_in"]);
    assert.deepEqual(graph.nodes.map((node) => node.label).sort(), ["Oslo", subject].sort());
  });

  test("writes an agent's work record and reads it back as the prompt text", async () => {
    const memsite = makeClient();
    const session = await memsite.createSession();
    const discovery = await memsite.addDiscovery(session.id, "Coder", { type: "codebase_structure", content: "Tests run with pytest." });
    const attempt = await memsite.addAttempt(session.id, "Coder", { description: "Fix the parser", approach: "Patch the parser", planStep: 2 });
    assert.equal(attempt.result, "in_progress");
    const concluded = await memsite.updateAttempt(session.id, "Coder", attempt.id, {
      result: "failure",
      error: "SyntaxError in the patch",
      output: "1 failed",
    });
    await memsite.addDecision(session.id, "Coder", { type: "implementation", description: "Rewrite the parser", reasoning: "Patching failed." });
    await memsite.setAgentContext(session.id, "Coder", { blockers: ["parser"], nextSteps: ["rewrite"] });

    assert.equal(discovery.id, "discovery-001");
    assert.equal(concluded.result, "failure");
    const document = await memsite.getAgentMemory(session.id, "Coder");
    assert.deepEqual(document.attempts.map((entry) => entry.approach), ["Patch the parser"]);
    assert.deepEqual(document.context, { blockers: ["parser"], nextSteps: ["rewrite"] });
    assert.deepEqual(await memsite.getAgentContext(session.id, "Coder"), { blockers: ["parser"], nextSteps: ["rewrite"] });
    const prompt = await memsite.agentMemoryPrompt(session.id, "Coder");
    assert.equal(typeof prompt, "string");
    assert.match(prompt, /Tests run with pytest\./);
    assert.match(prompt, /Fix the parser|Patch the parser/);
  });

  test("selects the team's approved experiences for a role", async () => {
    const admin = makeClient({ apiKey: ADMIN_KEY });
    const expId = unique("deploy").replace(/-/g, "_");
    await admin.api.request("PUT", "experiences/config/", { body: { llm_alias: "offline" } });
    await admin.api.request("POST", "experiences/", {
      body: { exp_id: expId, who: ["Planner"], when: "deploying the service to production", what: "Run the smoke tests first." },
    });
    await admin.api.request("POST", `experiences/${expId}/approve/`);

    const selection = await makeClient().selectExperiences({ role: "Planner", query: "deploying the service to production today" });

    assert.equal(selection.backend, "extractive"); // the offline backend
    assert.ok(selection.candidates.length >= 1);
    assert.deepEqual(selection.selected, [{ expId, what: "Run the smoke tests first." }]);
    assert.ok(selection.logId);
  });

  test("reads the event feed and follows it live", async () => {
    const memsite = makeClient();
    const session = await memsite.createSession();
    await memsite.appendMessage(session.id, { role: "user", content: "hello" });
    await memsite.resetSession(session.id);

    const events = await memsite.listEvents({ session: session.id });
    const reset = events.find((event) => event.kind === "reset");
    assert.ok(reset);
    assert.equal(reset.sessionId, session.id);

    const stop = new AbortController();
    const stream = memsite.streamEvents({ session: session.id, after: reset.id, signal: stop.signal });
    const next = stream.next();
    await new Promise((resolve) => setTimeout(resolve, 300));
    await memsite.resetSession(session.id);
    const { value } = await next;
    stop.abort();
    await stream.return?.();
    assert.equal(value.kind, "reset");
    assert.ok(value.id > reset.id);
  });

  test("the CommonJS build gives the same client", () => {
    const require = createRequire(import.meta.url);
    const cjs = require("memsite-client");
    const agents = require("memsite-client/agents");
    assert.equal(typeof cjs.MemsiteClient, "function");
    assert.notEqual(cjs.MemsiteClient, MemsiteClient); // its own module, not the ES one
    assert.equal(typeof agents.MemsiteSession, "function");
    assert.equal(typeof require("memsite-client/ai").memsiteTools, "function");
    assert.equal(typeof require("memsite-client/anthropic-memory").memsiteMemoryTool, "function");
    assert.ok(new cjs.MemsiteClient({ baseUrl: SERVER_URL, apiKey: "x" }).api.root.endsWith("/api/v1/"));
  });
});
