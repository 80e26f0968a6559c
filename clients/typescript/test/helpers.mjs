// What every test file shares: the live server's settings, given by the test that starts node
// (tests/memory_client/typescript/test_typescript_client.py), and a few waits.
import { MemsiteClient } from "memsite-client";

export const SERVER_URL = required("MEMSITE_URL");
export const API_KEY = required("MEMSITE_API_KEY");
/** An admin key of the same team (approving experiences, team settings). */
export const ADMIN_KEY = required("MEMSITE_ADMIN_KEY");

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests through pytest (see docs/testing.md).`);
  return value;
}

/** A client of the test team that records what it would log. */
export function makeClient(options = {}) {
  const logged = [];
  const client = new MemsiteClient({
    baseUrl: SERVER_URL,
    apiKey: API_KEY,
    logger: { warn: (message) => logged.push(message) },
    ...options,
  });
  return Object.assign(client, { logged });
}

export function unique(prefix) {
  return `${prefix}-${globalThis.crypto.randomUUID().slice(0, 8)}`;
}

/** Ask `probe` until it answers something truthy (background jobs: indexing, compaction). */
export async function eventually(probe, { timeoutMs = 20_000, everyMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`gave up waiting after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
