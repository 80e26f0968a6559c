import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { Agent, Usage, run, tool } from "@openai/agents";
import { MemsiteSession } from "memsite-client/agents";

import { API_KEY, SERVER_URL, eventually, makeClient, unique } from "./helpers.mjs";

function session(name, options = {}) {
  return new MemsiteSession({ sessionId: name, baseUrl: SERVER_URL, apiKey: API_KEY, logger: null, ...options });
}

/** Every kind of item a run writes, as the SDK writes them. */
const EVERY_KIND = [
  { role: "system", content: "Be brief." },
  { role: "user", content: "What is the weather in Oslo and Bergen?" },
  { type: "reasoning", id: "rs_1", content: [{ type: "input_text", text: "Two cities: two calls." }], providerData: { encryptedContent: "gAAA" } },
  { type: "function_call", id: "fc_1", callId: "call_oslo", name: "get_weather", arguments: '{"city":"Oslo"}', status: "completed" },
  { type: "function_call", id: "fc_2", callId: "call_bergen", name: "get_weather", arguments: '{"city":"Bergen"}', status: "completed" },
  { type: "function_call_result", callId: "call_oslo", name: "get_weather", status: "completed", output: { type: "text", text: "4 °C, rain" } },
  { type: "function_call_result", callId: "call_bergen", name: "get_weather", status: "completed", output: "9 °C, sun" },
  { id: "msg_1", type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "Oslo: rain. Bergen: sun." }] },
  { role: "user", content: [{ type: "input_text", text: "Thanks!" }, { type: "input_image", image: "https://example.com/map.png", detail: "low" }] },
  { type: "hosted_tool_call", id: "ws_1", name: "web_search_call", status: "completed", providerData: { action: { query: "oslo" } } },
];

/** A model that answers from a script, one response per call, and keeps what it was sent. */
class ScriptedModel {
  constructor(turns) {
    this.turns = [...turns];
    this.requests = [];
  }

  async getResponse(request) {
    this.requests.push(structuredClone(request.input));
    const output = this.turns.shift();
    if (!output) throw new Error("the script ran out");
    return { usage: new Usage(), output, responseId: `resp_${this.requests.length}` };
  }

  // eslint-disable-next-line require-yield
  async *getStreamedResponse() {
    throw new Error("not streamed in these tests");
  }
}

const call = (callId, city) => ({
  type: "function_call",
  id: `fc_${callId}`,
  callId,
  name: "get_weather",
  arguments: JSON.stringify({ city }),
  status: "completed",
});
const say = (text) => ({ id: `msg_${text.length}`, type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text }] });

const getWeather = tool({
  name: "get_weather",
  description: "The weather in a city.",
  parameters: {
    type: "object",
    properties: { city: { type: "string" } },
    required: ["city"],
    additionalProperties: false,
  },
  strict: true,
  execute: async ({ city }) => (city === "Oslo" ? "4 °C, rain" : "9 °C, sun"),
});

describe("the Agents SDK session", () => {
  test("gives back every kind of item exactly as added, and stores each as chat the server understands", async () => {
    const name = unique("agents-items");
    const memory = session(name);
    await memory.addItems(EVERY_KIND.slice(0, 5));
    await memory.addItems(EVERY_KIND.slice(5));

    assert.deepEqual(await memory.getItems(), EVERY_KIND);
    assert.equal(await memory.getSessionId(), name);
    const stored = (await makeClient().listMessages(await memory.memsiteSessionId())).results;
    assert.deepEqual(
      stored.map((row) => [row.role, row.content, row.tool_calls?.map((call) => call.id) ?? null, row.tool_call_id ?? null]),
      [
        ["system", "Be brief.", null, null],
        ["user", "What is the weather in Oslo and Bergen?", null, null],
        ["assistant", null, ["call_oslo", "call_bergen"], null], // the turn's parallel calls: one message
        ["tool", "4 °C, rain", null, "call_oslo"],
        ["tool", "9 °C, sun", null, "call_bergen"],
        ["assistant", "Oslo: rain. Bergen: sun.", null, null],
        ["user", [{ type: "text", text: "Thanks!" }, { type: "image_url", image_url: { url: "https://example.com/map.png", detail: "low" } }], null, null],
        ["assistant", "", null, null],
      ],
    );
    assert.deepEqual(stored[2].reasoning_details, [
      { type: "reasoning.summary", summary: "Two cities: two calls.", id: "rs_1" },
      { type: "reasoning.encrypted", data: "gAAA", id: "rs_1" },
    ]);
  });

  test("a limit gives the newest items; popItem takes them one at a time; clearSession empties it", async () => {
    const memory = session(unique("agents-pop"));
    assert.deepEqual(await memory.getItems(), []);
    assert.equal(await memory.popItem(), undefined);
    assert.equal(await memory.memsiteSessionId(), null); // reading creates nothing
    await memory.addItems(EVERY_KIND.slice(0, 8));

    assert.deepEqual(await memory.getItems(3), EVERY_KIND.slice(5, 8));
    assert.deepEqual(await memory.popItem(), EVERY_KIND[7]);
    assert.deepEqual(await memory.popItem(), EVERY_KIND[6]);
    assert.deepEqual(await memory.popItem(), EVERY_KIND[5]);
    assert.deepEqual(await memory.popItem(), EVERY_KIND[4]); // the second call of a turn: the turn keeps the rest
    assert.deepEqual(await memory.getItems(), EVERY_KIND.slice(0, 4));
    await memory.clearSession();
    assert.deepEqual(await memory.getItems(), []);
    await memory.addItems([{ role: "user", content: "again" }]);
    assert.deepEqual(await memory.getItems(), [{ role: "user", content: "again" }]);
  });

  test("messages other clients wrote are read as items", async () => {
    const memsite = makeClient();
    const name = unique("agents-others");
    const created = await memsite.createSession({ externalId: name });
    await memsite.appendMessages(created.id, [
      { role: "user", content: "Weather in Oslo?" },
      { role: "assistant", content: null, tool_calls: [{ id: "c1", type: "function", function: { name: "get_weather", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "c1", content: "rain" },
      { role: "assistant", content: "Rainy." },
    ]);

    assert.deepEqual(await session(name).getItems(), [
      { role: "user", content: "Weather in Oslo?" },
      { type: "function_call", callId: "c1", name: "get_weather", arguments: "{}", status: "completed" },
      { type: "function_call_result", callId: "c1", name: "get_weather", status: "completed", output: { type: "text", text: "rain" } },
      { role: "assistant", status: "completed", content: [{ type: "output_text", text: "Rainy." }] },
    ]);
  });

  test("run() with a scripted model over several tool-calling turns; the second run sees the first", async () => {
    const name = unique("agents-run");
    const model = new ScriptedModel([
      [call("call_oslo", "Oslo")],
      [call("call_bergen", "Bergen")],
      [say("Oslo: 4 °C and rain. Bergen: 9 °C and sun.")],
      [say("You asked about Oslo and Bergen.")],
    ]);
    const agent = new Agent({ name: "Forecaster", instructions: "Answer about the weather.", model, tools: [getWeather] });

    const first = await run(agent, "Weather in Oslo and Bergen?", { session: session(name) });
    const second = await run(agent, "Which cities did I ask about?", { session: session(name) });

    assert.equal(first.finalOutput, "Oslo: 4 °C and rain. Bergen: 9 °C and sun.");
    assert.equal(second.finalOutput, "You asked about Oslo and Bergen.");
    const sent = model.requests.at(-1); // what the model got on the second run: all of the first, from memsite
    assert.deepEqual(
      sent.map((item) => item.type === "message" || item.role ? `${item.role}` : `${item.type}:${item.callId}`),
      [
        "user",
        "function_call:call_oslo",
        "function_call_result:call_oslo",
        "function_call:call_bergen",
        "function_call_result:call_bergen",
        "assistant",
        "user",
      ],
    );
    assert.equal(sent.find((item) => item.callId === "call_bergen" && item.type === "function_call_result").output.text, "9 °C, sun");
    const history = await session(name).getItems();
    assert.equal(history.length, 8); // the first run's six items, the second's question and answer
    assert.deepEqual(history.slice(0, 7), sent);
    const stored = (await makeClient().listMessages(await session(name).memsiteSessionId())).results;
    assert.deepEqual(stored.map((row) => row.role), ["user", "assistant", "tool", "assistant", "tool", "assistant", "user", "assistant"]);
  });

  test("the managed context after a compaction is the summary and the newest items whole", async () => {
    const name = unique("agents-managed");
    const memory = session(name, {
      memoryType: "managed_conversation",
      memoryConfig: { threshold_tokens: 1000, active_context: { summarization: { grace_recent_messages: 1 } } },
    });
    const filler = "The forecast discussion goes on and on about pressure systems. ".repeat(20);
    const older = [];
    for (let turn = 0; turn < 6; turn += 1) {
      older.push({ role: "user", content: `Question ${turn}: ${filler}` }, say(`Ok ${turn}.`));
    }
    const newest = [
      { role: "user", content: "And Oslo?" },
      call("call_oslo", "Oslo"),
      { type: "function_call_result", callId: "call_oslo", name: "get_weather", status: "completed", output: { type: "text", text: "4 °C, rain" } },
      say("Rain."),
    ];
    await memory.addItems(older);
    const memsite = makeClient();
    const sessionId = await memory.memsiteSessionId();
    // The append that crossed the threshold queued a compaction; a worker runs it.
    await eventually(async () => (await memsite.listCompactions(sessionId)).some((run) => run.status === "done"));
    await memory.addItems(newest);

    const managed = session(name, { context: "managed" });
    const items = await managed.getItems();

    assert.deepEqual(await memory.getItems(), [...older, ...newest]); // the raw history is never rewritten
    assert.deepEqual(items.slice(-4), newest);
    const served = JSON.stringify(items);
    assert.match(served, /what happened/); // the summary
    assert.deepEqual(items[0], older[0]); // the original instruction, kept ahead of the summary
    for (let turn = 1; turn < 6; turn += 1) assert.ok(!served.includes(`Question ${turn}:`));
    // A limit that would cut the tool result from its call drops the orphan result.
    assert.deepEqual(await managed.getItems(2), [newest[3]]);
    assert.deepEqual(await managed.getItems(3), newest.slice(1));

    const replay = await managed.replayContext();
    assert.equal(replay.sessionId, sessionId);
    assert.ok(replay.summary);
  });
});
