// Run in an empty project where only the packed memsite-client was installed.
import { createRequire } from "node:module";
import { spawnSync } from "node:child_process";

import { MemsiteClient } from "memsite-client";

const memsite = new MemsiteClient();
const session = await memsite.createSession({ systemPrompt: "You are a weather assistant." });
await memsite.appendMessage(session.id, { role: "user", content: "What is the weather in Oslo?" });
const { messages } = await memsite.getContext(session.id);
const cjs = spawnSync(process.execPath, ["smoke.cjs", session.id], { encoding: "utf8", env: process.env });
if (cjs.status !== 0) throw new Error(cjs.stderr);
const resolved = createRequire(import.meta.url).resolve("memsite-client");
console.log(JSON.stringify({ resolved, context: messages, cjs: JSON.parse(cjs.stdout) }));
