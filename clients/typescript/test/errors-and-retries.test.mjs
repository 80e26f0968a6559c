import assert from "node:assert/strict";
import { createServer } from "node:http";
import { inspect } from "node:util";
import { after, before, describe, test } from "node:test";

import {
  ApiError,
  AuthenticationError,
  ConflictError,
  ConnectionError,
  MemsiteClient,
  NotFoundError,
  RateLimitError,
  ServerError,
  ValidationError,
} from "memsite-client";

import { API_KEY, SERVER_URL, makeClient, unique } from "./helpers.mjs";

/**
 * A proxy in front of the live server that answers the next requests it is told to with a fault
 * (429 or 503 with Retry-After) instead of forwarding them, and forwards everything else.
 */
class FaultProxy {
  faults = [];
  seen = [];

  async start() {
    this.server = createServer(async (request, response) => {
      const chunks = [];
      for await (const chunk of request) chunks.push(chunk);
      this.seen.push({ method: request.method, url: request.url, key: request.headers["idempotency-key"] });
      const fault = this.faults.shift();
      if (fault) {
        response.writeHead(fault.status, { "Content-Type": "application/json", "Retry-After": fault.retryAfter });
        response.end(JSON.stringify({ error: fault.error, detail: "injected by the test", fields: {} }));
        return;
      }
      const headers = { ...request.headers };
      delete headers.host;
      delete headers.connection;
      const body = chunks.length ? Buffer.concat(chunks) : undefined;
      const upstream = await fetch(new URL(request.url, SERVER_URL), { method: request.method, headers, body });
      const text = Buffer.from(await upstream.arrayBuffer());
      response.writeHead(upstream.status, { "Content-Type": upstream.headers.get("Content-Type") ?? "application/json" });
      response.end(text);
    });
    await new Promise((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    this.url = `http://127.0.0.1:${this.server.address().port}`;
  }

  stop() {
    return new Promise((resolve) => this.server.close(resolve));
  }
}

describe("errors and retries", () => {
  const proxy = new FaultProxy();
  before(() => proxy.start());
  after(() => proxy.stop());

  test("errors are typed classes carrying the API's error, detail and fields", async () => {
    const memsite = makeClient();
    const session = await memsite.createSession({ externalId: unique("taken") });

    const invalid = await memsite.appendMessage(session.id, { role: "tool", content: "orphan" }).catch((error) => error);
    assert.ok(invalid instanceof ValidationError && invalid instanceof ApiError);
    assert.equal(invalid.status, 400);
    assert.equal(invalid.error, "validation_error");
    assert.ok(Object.keys(invalid.fields).some((path) => path.includes("tool_call_id")), JSON.stringify(invalid.fields));

    const missing = await memsite.getSession(globalThis.crypto.randomUUID()).catch((error) => error);
    assert.ok(missing instanceof NotFoundError);
    assert.equal(missing.error, "not_found");

    const taken = await memsite.createSession({ externalId: session.externalId }).catch((error) => error);
    assert.ok(taken instanceof ConflictError);
    assert.equal(taken.status, 409);

    const stranger = new MemsiteClient({ baseUrl: SERVER_URL, apiKey: "msk_not_a_key" });
    const refused = await stranger.listSessions().catch((error) => error);
    assert.ok(refused instanceof AuthenticationError);
    assert.equal(refused.status, 401);
  });

  test("a 429 and a 503 are retried after their Retry-After, and a keyed append is stored once", async () => {
    const logged = [];
    const memsite = new MemsiteClient({ baseUrl: proxy.url, apiKey: API_KEY, logger: { warn: (line) => logged.push(line) } });
    const session = await memsite.createSession();
    proxy.seen.length = 0;
    proxy.faults.push(
      { status: 429, error: "throttled", retryAfter: "1" },
      { status: 503, error: "database_unavailable", retryAfter: "0" },
    );

    const started = Date.now();
    const stored = await memsite.appendMessage(session.id, { role: "user", content: "kept once" });

    assert.ok(Date.now() - started >= 950, "waited the Retry-After");
    assert.equal(stored.seq, 1);
    assert.equal(proxy.seen.length, 3);
    assert.equal(new Set(proxy.seen.map((request) => request.key)).size, 1); // one Idempotency-Key for all attempts
    assert.equal((await makeClient().listMessages(session.id)).results.length, 1);
    assert.equal(logged.length, 2);
    assert.match(logged[0], /POST sessions\/.*\/messages\/ failed \(attempt 1, 429\); retrying in 1\.00s/);
  });

  test("a write without an idempotency key is not retried after a 503, and errors past the retries surface", async () => {
    const memsite = new MemsiteClient({ baseUrl: proxy.url, apiKey: API_KEY, logger: null, maxRetries: 1 });
    const session = await memsite.createSession();
    const [row] = await memsite.appendMessages(session.id, [{ role: "user", content: "before" }]);

    proxy.faults.push({ status: 503, error: "database_unavailable", retryAfter: "0" });
    const unavailable = await memsite.updateMessage(session.id, row.messageId, { content: "after" }).catch((error) => error);
    assert.ok(unavailable instanceof ServerError);
    assert.equal(unavailable.error, "database_unavailable");
    assert.equal(unavailable.retryAfter, 0);
    assert.equal((await memsite.getMessage(session.id, row.messageId)).content, "before");

    proxy.faults.push(
      { status: 429, error: "throttled", retryAfter: "0" },
      { status: 429, error: "throttled", retryAfter: "0" },
    );
    const throttled = await memsite.getSession(session.id).catch((error) => error);
    assert.ok(throttled instanceof RateLimitError);

    proxy.faults.push({ status: 429, error: "budget_exceeded", retryAfter: "3600" });
    const started = Date.now();
    const budget = await memsite.getSession(session.id).catch((error) => error);
    assert.ok(budget instanceof RateLimitError);
    assert.equal(budget.retryAfter, 3600); // not waited for: longer than maxRetryAfterMs
    assert.ok(Date.now() - started < 2000);
  });

  test("an unreachable server is a ConnectionError after the retries", async () => {
    const closed = createServer();
    await new Promise((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = closed.address().port;
    await new Promise((resolve) => closed.close(resolve));
    const memsite = new MemsiteClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey: API_KEY, logger: null, maxRetries: 1 });

    const error = await memsite.listSessions().catch((caught) => caught);

    assert.ok(error instanceof ConnectionError);
    assert.equal(error.status, null);
    assert.equal(error.error, "unreachable");
  });

  test("the API key is never logged, printed or part of an error", async () => {
    const logged = [];
    const memsite = new MemsiteClient({ baseUrl: proxy.url, apiKey: API_KEY, logger: { warn: (line) => logged.push(line) } });
    proxy.faults.push({ status: 503, error: "database_unavailable", retryAfter: "0" });
    await memsite.listSessions();
    const failure = await memsite.getSession(globalThis.crypto.randomUUID()).catch((error) => error);
    const stranger = await new MemsiteClient({ baseUrl: SERVER_URL, apiKey: API_KEY + "x" }).listSessions().catch((error) => error);

    const shown = [
      ...logged,
      inspect(memsite, { depth: 10, showHidden: true }),
      JSON.stringify(memsite),
      String(memsite),
      inspect(failure, { depth: 10 }),
      JSON.stringify(failure),
      failure.stack,
      inspect(stranger, { depth: 10 }),
      stranger.message,
    ].join("\n");
    assert.equal(logged.length, 1);
    assert.ok(!shown.includes(API_KEY), "the key leaked");
    assert.ok(!shown.includes(API_KEY.slice(8)), "part of the key leaked");
  });

  test("a client without a URL or a key says what to set", () => {
    const saved = { url: process.env.MEMSITE_URL, key: process.env.MEMSITE_API_KEY };
    delete process.env.MEMSITE_URL;
    delete process.env.MEMSITE_API_KEY;
    try {
      assert.throws(() => new MemsiteClient({ apiKey: "k" }), /MEMSITE_URL/);
      assert.throws(() => new MemsiteClient({ baseUrl: SERVER_URL }), /MEMSITE_API_KEY/);
    } finally {
      process.env.MEMSITE_URL = saved.url;
      process.env.MEMSITE_API_KEY = saved.key;
    }
  });
});
