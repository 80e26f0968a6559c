// One node process runs every test file (node --test would start one per file).
import "./client.test.mjs";
import "./errors-and-retries.test.mjs";
import "./agents.test.mjs";
import "./ai.test.mjs";
import "./anthropic-memory.test.mjs";
