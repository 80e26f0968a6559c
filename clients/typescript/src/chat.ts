/** OpenAI chat messages as memsite stores and serves them. */

/** A chat content part: `{type: "text", text}`, `{type: "image_url", image_url: {url}}`, ... */
export interface ContentPart {
  type: string;
  [key: string]: unknown;
}

export interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** A message in OpenAI's chat format (what `/context/` serves, and what appends take). */
export interface ChatMessage {
  role: "system" | "user" | "assistant" | "tool" | "developer" | string;
  content: string | ContentPart[] | null | Record<string, unknown>;
  name?: string;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  [key: string]: unknown;
}

/** The text of a message content: a string, the text parts of a content list, or JSON. */
export function contentText(content: unknown): string {
  if (content === null || content === undefined) return "";
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content
      .filter((part): part is ContentPart => isRecord(part) && part.type === "text")
      .map((part) => String(part.text ?? ""))
      .join(" ");
  }
  return JSON.stringify(content);
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** JSON with object keys sorted: the same text for the same value, whatever the key order. */
export function stableJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (isRecord(value)) {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, sortKeys(value[key])]),
    );
  }
  return value;
}

function imageParts(images: unknown[]): ContentPart[] {
  return images.map((url) => ({ type: "image_url", image_url: { url } }));
}

/** A stored message in exactly OpenAI's chat format, as `/context/` serves it (no other keys). */
export function toOpenAIMessage(row: Record<string, unknown>): ChatMessage {
  if (row.role === "tool") {
    const content = row.content;
    const message: ChatMessage = {
      role: "tool",
      content: content === null || content === undefined ? "" : typeof content === "string" ? content : contentText(content),
    };
    if (row.tool_call_id) message.tool_call_id = String(row.tool_call_id);
    if (row.name) message.name = String(row.name);
    return message;
  }
  const images = Array.isArray(row.images) ? row.images : [];
  let content = row.content as ChatMessage["content"];
  if (Array.isArray(content)) {
    content = [...content, ...imageParts(images)];
  } else if (images.length) {
    const text = contentText(content);
    content = [...(text.trim() ? [{ type: "text", text }] : []), ...imageParts(images)];
  } else if (isRecord(content)) {
    content = JSON.stringify(content);
  }
  const message: ChatMessage = { role: String(row.role), content: content ?? null };
  if (row.name) message.name = String(row.name);
  if (Array.isArray(row.tool_calls) && row.tool_calls.length) {
    message.tool_calls = (row.tool_calls as ToolCall[]).map((call) => ({
      id: call.id,
      type: call.type ?? "function",
      function: { name: call.function.name, arguments: call.function.arguments },
    }));
  }
  return message;
}
