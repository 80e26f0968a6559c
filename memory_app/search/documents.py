"""What each kind of memory looks like to the search index: the text of a source, cut into
pieces, with the facts a search filters on and the source it links back to."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory_app.agent_records.models import AgentMemoryEntry
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.models import Message
from memory_app.facts.models import Fact
from memory_app.memory_files.models import MemoryFile
from memory_app.rounds.models import Attachment, SharedMemoryEntry
from memory_app.search.models import SearchKind
from memory_app.search.text import CHUNK_CHARS, chunks
from memory_client.vocabulary.messages import content_text

# Attachment types whose content is prose or code worth finding (not ids or binary references).
TEXT_ATTACHMENT_TYPES = frozenset(
    {"thought", "text", "plan", "current_plan", "reply_content", "python", "execution_result", "revise_message"}
)
# The fields of an agent record entry that say something (the record format's prose), in the
# order they are read; ids, timestamps, counters and fields the format does not define are left out.
RECORD_TEXT_FIELDS = (
    "description",
    "content",
    "reasoning",
    "approach",
    "result",
    "output",
    "error",
    "lessons",
    "currentIssue",
    "nextStep",
    "nextAttempt",
    "alternatives",
    "subTasks",
    "actionItems",
    "commands",
    "relatedFiles",
)
_NESTED_TEXT_KEYS = frozenset({"name", "reason", "description", "path", "status", "content", "action"})


@dataclass(frozen=True)
class Doc:
    """One piece of text to index, and where it came from."""

    kind: str
    source_key: str
    text: str
    occurred_at: datetime
    chunk: int = 0
    links: Mapping[str, Any] = field(default_factory=dict)  # session_id, message_id, fact_id ...
    agent: str = ""
    role: str = ""
    seq: int | None = None
    valid_from: datetime | None = None
    invalidated_at: datetime | None = None
    context: str = ""  # words that help find it, not its own (see SearchItem.context)

    @property
    def text_hash(self) -> str:
        return hashlib.blake2b(self.text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _tool_call_text(tool_calls: Any) -> str:
    """ "name(arguments)" for each call: an agent asking "when did we run the migration" means these."""
    parts = []
    for call in tool_calls or []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            parts.append(f"{function.get('name', '')}({function.get('arguments', '')})")
    return "\n".join(parts)


# Keys an image part may carry its description under: OpenAI's format has none, so clients and
# importers use these (a shared photo's object is often named only in its caption).
IMAGE_CAPTION_KEYS = ("caption", "alt", "alt_text", "description", "detail_text")
# How much of the turn a message answers goes into its context: enough for the question's words.
PREVIOUS_TURN_CHARS = 400


def _image_captions(content: Any) -> list[str]:
    captions: list[str] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping) or part.get("type") != "image_url":
            continue
        for holder in (part, part.get("image_url")):
            if isinstance(holder, Mapping):
                captions += [holder[key].strip() for key in IMAGE_CAPTION_KEYS if isinstance(holder.get(key), str)]
    return [caption for caption in captions if caption]


def message_text(message: Message) -> str:
    text = content_text(message.content) if message.content is not None else ""
    images = " ".join(f"[image: {caption}]" for caption in _image_captions(message.content))
    calls = _tool_call_text(message.tool_calls)
    return "\n".join(part for part in (text, images, calls) if part)


def speaker_of(message: Message, *, agent: str = "") -> str:
    """Who said it: the message's `name`, else who sent it (rounds), else the session's agent."""
    return message.name or message.send_from or agent or ""


def without_speaker_label(text: str, speaker: str) -> str:
    """`text` without a leading "<speaker>:" label (chat exports and benchmarks write turns so).

    What is embedded: the label would make every turn of a speaker look alike to the model, so a
    question naming one person finds that person's small talk before the other's answer. The
    label stays in the text the words are matched on."""
    if speaker and text[: len(speaker) + 1].lower() == f"{speaker.lower()}:":
        return text[len(speaker) + 1 :].lstrip()
    return text


def message_context(message: Message, *, speaker: str, previous: Message | None) -> str:
    """The words that help find a message besides its own: its speaker (when its text does not
    already open with the name) and the start of the turn it answers."""
    parts = [] if not speaker or message_text(message).lower().startswith(speaker.lower()) else [speaker]
    if previous is not None:
        before = without_speaker_label(message_text(previous), speaker_of(previous))
        parts.append(before[:PREVIOUS_TURN_CHARS])
    return "\n".join(part for part in parts if part)


def message_docs(message: Message, *, agent: str = "", previous: Message | None = None) -> Iterator[Doc]:
    """A message's pieces; `previous` is the message before it in its session, whose words help
    find it (the hit still points at this message)."""
    links = {"session_id": message.session_id, "message_id": message.pk}
    who = speaker_of(message, agent=agent)
    context = message_context(message, speaker=who, previous=previous)
    for position, piece in enumerate(chunks(message_text(message))):
        yield Doc(
            kind=SearchKind.MESSAGE,
            source_key=str(message.pk),
            chunk=position,
            text=piece,
            occurred_at=message.said_at,
            links=links,
            agent=who,
            role=message.role,
            seq=message.seq,
            context=context,
        )


def attachment_docs(attachment: Attachment, message: Message, *, agent: str = "") -> Iterator[Doc]:
    if attachment.type not in TEXT_ATTACHMENT_TYPES:
        return
    links = {"session_id": message.session_id, "message_id": message.pk, "attachment_id": attachment.pk}
    for position, piece in enumerate(chunks(attachment.content)):
        yield Doc(
            kind=SearchKind.ATTACHMENT,
            source_key=str(attachment.pk),
            chunk=position,
            text=piece,
            occurred_at=message.said_at,
            links=links,
            agent=speaker_of(message, agent=agent),
            role=attachment.type,
            seq=message.seq,
        )


def summary_docs(run: CompactionRun, *, agent: str = "") -> Iterator[Doc]:
    """A compaction's summary (the messages that stand in for a range), as one source."""
    text = "\n".join(content_text(part.get("content")) for part in run.summary or [] if isinstance(part, Mapping))
    links = {"session_id": run.session_id, "compaction_run_id": run.pk}
    for position, piece in enumerate(chunks(text)):
        yield Doc(
            kind=SearchKind.SUMMARY,
            source_key=str(run.pk),
            chunk=position,
            text=piece,
            occurred_at=run.finished_at or run.created_at,
            links=links,
            agent=agent,
            role="summary",
            seq=run.covered_to_seq,
        )


def fact_sentence(fact: Fact) -> str:
    return f"{fact.subject} {fact.predicate.replace('_', ' ')} {fact.object}"


def fact_docs(fact: Fact) -> Iterator[Doc]:
    links = {"session_id": fact.session_id, "fact_id": fact.pk, "message_id": fact.source_message_id}
    yield Doc(
        kind=SearchKind.FACT,
        source_key=str(fact.pk),
        text=fact_sentence(fact),
        occurred_at=fact.valid_from,
        links=links,
        agent=fact.role,
        role=fact.role,
        valid_from=fact.valid_from,
        invalidated_at=fact.invalidated_at,
    )


def _leaf_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if value.strip():
            yield value.strip()
    elif isinstance(value, Mapping):
        for key, inner in value.items():
            if key in _NESTED_TEXT_KEYS:
                yield from _leaf_strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _leaf_strings(inner)


def record_entry_text(entry: AgentMemoryEntry) -> str:
    """An agent's discovery, attempt or decision as prose: its kind, then every text it holds."""
    data = entry.data if isinstance(entry.data, Mapping) else {}
    head = f"{entry.kind} ({data.get('type')})" if isinstance(data.get("type"), str) else entry.kind
    body = [text for name in RECORD_TEXT_FIELDS for text in _leaf_strings(data.get(name))]
    return "\n".join([f"{head}:", *body])


def record_entry_docs(entry: AgentMemoryEntry, *, session_id: Any, agent: str) -> Iterator[Doc]:
    links = {"session_id": session_id, "record_entry_id": entry.pk}
    for position, piece in enumerate(chunks(record_entry_text(entry))):
        yield Doc(
            kind=SearchKind.RECORD,
            source_key=str(entry.pk),
            chunk=position,
            text=piece,
            occurred_at=entry.timestamp or entry.created_at,
            links=links,
            agent=agent,
            role=entry.kind,
            # An archived entry was superseded by the record's newer ones.
            invalidated_at=entry.archived_at,
        )


def shared_memory_docs(entry: SharedMemoryEntry) -> Iterator[Doc]:
    links = {"session_id": entry.session_id, "shared_memory_id": entry.pk}
    for position, piece in enumerate(chunks(f"{entry.type}: {entry.content}")):
        yield Doc(
            kind=SearchKind.SHARED_MEMORY,
            source_key=str(entry.pk),
            chunk=position,
            text=piece,
            occurred_at=entry.created_at,
            links=links,
            agent=entry.created_by,
            role=entry.scope,
        )


def experience_doc(
    *, experience_id: int, when: str, roles: Iterable[str], created_at: datetime, retired_at: datetime | None = None
) -> Doc:
    """An experience is found by its `when` (the situation it is for); experiences live in
    another app, which builds its own documents with this. A disabled one is `retired_at`."""
    return Doc(
        kind=SearchKind.EXPERIENCE,
        source_key=str(experience_id),
        text=when.strip()[: CHUNK_CHARS * 4],
        occurred_at=created_at,
        links={},
        agent=", ".join(roles),
        role="experience",
        invalidated_at=retired_at,
    )


def memory_file_docs(file: MemoryFile) -> Iterator[Doc]:
    """A memory file: found by its text and by the words of its path (notes/deploy-checklist.md)."""
    for position, piece in enumerate(chunks(file.content)):
        yield Doc(
            kind=SearchKind.MEMORY_FILE,
            source_key=str(file.pk),
            chunk=position,
            text=piece,
            occurred_at=file.updated_at,
            links={},
            agent=file.agent,
            role="memory file",
            context=file.path.replace("/", " ").replace("-", " ").replace("_", " "),
        )
