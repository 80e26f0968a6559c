/**
 * A memsite session named by a framework's own id ("user-42", a thread id): kept as the session's
 * `external_id` (unique per team), looked up once and created by the first write that needs it.
 */
import type { MemsiteClient } from "./client.js";
import { ConflictError } from "./errors.js";
import type { MessageInput, SessionInput, StoredMessage } from "./types.js";

/** Messages per append request, well under the server's per-request limit. */
export const BATCH = 100;
/** The largest `last` the message list and the context take. */
export const MAX_LAST = 10_000;

export class NamedSession {
  #id: string | null = null;
  #lookup: Promise<string | null> | null = null;

  constructor(
    readonly client: MemsiteClient,
    readonly name: string,
    private readonly settings: SessionInput = {},
  ) {
    if (!name) throw new Error("A session needs a non-empty id.");
  }

  /** The session's id; null when it does not exist yet and `create` is false (a read). */
  async id(create: boolean): Promise<string | null> {
    if (this.#id !== null) return this.#id;
    this.#lookup ??= this.find().finally(() => {
      this.#lookup = null;
    });
    const found = await this.#lookup;
    if (found !== null) {
      this.#id = found;
    } else if (create) {
      this.#id = await this.create();
    }
    return this.#id;
  }

  private async find(): Promise<string | null> {
    return (await this.client.findSession(this.name))?.id ?? null;
  }

  private async create(): Promise<string> {
    try {
      return (await this.client.createSession({ ...this.settings, externalId: this.name })).id;
    } catch (error) {
      // Another process created it between our lookup and our create: use theirs.
      if (!(error instanceof ConflictError)) throw error;
      const found = await this.find();
      if (found === null) throw error;
      return found;
    }
  }

  /** Stored messages in seq order: the newest `last`, or every one page by page. */
  async rows(sessionId: string, last?: number): Promise<StoredMessage[]> {
    if (last !== undefined && last <= MAX_LAST) {
      return (await this.client.listMessages(sessionId, { last })).results;
    }
    const rows: StoredMessage[] = [];
    for await (const row of this.client.iterMessages(sessionId)) rows.push(row);
    return last !== undefined ? rows.slice(-last) : rows;
  }

  /** Append in order, creating the session on first use; up to BATCH messages per atomic request. */
  async append(messages: MessageInput[]): Promise<void> {
    if (messages.length === 0) return;
    const sessionId = (await this.id(true)) as string;
    for (let start = 0; start < messages.length; start += BATCH) {
      await this.client.appendMessages(sessionId, messages.slice(start, start + BATCH));
    }
  }

  /** Delete every message, keep the session (its external_id, prompt and settings). */
  async reset(): Promise<void> {
    const sessionId = await this.id(false);
    if (sessionId !== null) await this.client.resetSession(sessionId);
  }
}
