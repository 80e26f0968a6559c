"""The labelled conversations `manage.py recall_eval` measures recall on: the file format, its
validation, and how a turn is written as a message (pure: no Django, so the generator of
bench/recall_sets.py writes and checks its sets with the same rules).

A file holds conversations between people, in dated sessions of turns, and questions about them,
each naming the turns that hold its evidence:

    {"conversations": [{"id": "c1", "speakers": ["Maya", "Leo"],
        "sessions": [{"id": "s1", "date": "2023-05-08", "turns": [
            {"id": "s1:1", "speaker": "Maya", "text": "Look what I found!", "image_caption": "a brass telescope"}]}],
        "questions": [{"id": "q1", "question": "What did Maya find?", "evidence": ["s1:1"],
                       "category": "single-hop"}]}]}

Ids are strings; turn, session and question ids are unique within their conversation (evidence
names turns of its own conversation), conversation ids within the file. A date is ISO 8601 (a
day, or a day and a time); one without an offset is UTC (`session_time`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NotRequired, TypedDict

CATEGORIES = ("single-hop", "multi-hop", "temporal", "open-domain", "adversarial")
SPEAKER_MAX_CHARS = 200  # a message's `name` holds the speaker
MAX_PROBLEMS = 20  # listed in one error: enough to fix a file in a few passes, short enough to read


class Turn(TypedDict):
    id: str
    speaker: str
    text: str
    image_caption: NotRequired[str]


class EvalSession(TypedDict):
    id: str
    date: str
    turns: list[Turn]


class Question(TypedDict):
    id: str
    question: str
    evidence: list[str]
    category: str


class Conversation(TypedDict):
    id: str
    speakers: list[str]
    sessions: list[EvalSession]
    questions: list[Question]


class EvalSet(TypedDict):
    conversations: list[Conversation]


class EvalSetError(ValueError):
    """The file is not a valid set; `problems` lists each one with where it is."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        shown = self.problems[:MAX_PROBLEMS]
        more = len(self.problems) - len(shown)
        lines = [*shown, *([f"... and {more} more"] if more > 0 else [])]
        super().__init__("invalid recall set:\n  " + "\n  ".join(lines))


def message_content(turn: Turn) -> str:
    """A turn as the message memsite stores: who said it, what they said, and the caption of the
    photo they shared (the photo's object is often named only there)."""
    content = f"{turn['speaker']}: {turn['text']}"
    caption = turn.get("image_caption")
    return f"{content} [shares a photo: {caption}]" if caption else content


def load_evalset(path: Path) -> EvalSet:
    """Read and validate a set; EvalSetError says what is wrong and where."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise EvalSetError([f"{path}: cannot be read ({exc})"]) from exc
    except json.JSONDecodeError as exc:
        raise EvalSetError([f"{path}: not JSON ({exc})"]) from exc
    return validate_evalset(data)


def validate_evalset(data: Any) -> EvalSet:
    """`data` as an EvalSet, or EvalSetError listing every problem found (up to MAX_PROBLEMS shown)."""
    problems: list[str] = []
    if not isinstance(data, Mapping) or not isinstance(data.get("conversations"), list):
        raise EvalSetError(['the file: must be an object with a "conversations" list'])
    if not data["conversations"]:
        raise EvalSetError(["conversations: the list is empty"])
    seen: set[str] = set()
    for index, conversation in enumerate(data["conversations"]):
        where = _place("conversations", index, conversation)
        _check_conversation(conversation, where=where, problems=problems)
        conversation_id = conversation.get("id") if isinstance(conversation, Mapping) else None
        if isinstance(conversation_id, str):
            if conversation_id in seen:
                problems.append(f"{where}: id: another conversation has the id {conversation_id!r}")
            seen.add(conversation_id)
    if problems:
        raise EvalSetError(problems)
    return EvalSet(conversations=[_conversation(c) for c in data["conversations"]])


def _place(name: str, index: int, value: Any) -> str:
    """Where a problem is, for a person reading the file: the list, the position and the id."""
    label = value.get("id") if isinstance(value, Mapping) else None
    return f"{name}[{index}]" + (f" (id {label!r})" if isinstance(label, str) else "")


def _check_id(value: Mapping[str, Any], *, where: str, problems: list[str]) -> None:
    if not isinstance(value.get("id"), str) or not value["id"].strip():
        problems.append(f"{where}: id: must be a non-empty string")


def _check_text(value: Mapping[str, Any], name: str, *, where: str, problems: list[str]) -> None:
    if not isinstance(value.get(name), str) or not value[name].strip():
        problems.append(f"{where}: {name}: must be a non-empty string")


def _check_list(value: Mapping[str, Any], name: str, *, where: str, problems: list[str]) -> list[Any]:
    items = value.get(name)
    if not isinstance(items, list) or not items:
        problems.append(f"{where}: {name}: must be a non-empty list")
        return []
    return items


def _check_conversation(conversation: Any, *, where: str, problems: list[str]) -> None:
    if not isinstance(conversation, Mapping):
        problems.append(f"{where}: must be an object")
        return
    _check_id(conversation, where=where, problems=problems)
    speakers = _check_list(conversation, "speakers", where=where, problems=problems)
    for index, speaker in enumerate(speakers):
        if not isinstance(speaker, str) or not speaker.strip() or len(speaker) > SPEAKER_MAX_CHARS:
            problems.append(f"{where}: speakers[{index}]: must be a name of 1 to {SPEAKER_MAX_CHARS} characters")
    names = {speaker for speaker in speakers if isinstance(speaker, str)}
    turn_ids = _check_sessions(conversation, speakers=names, where=where, problems=problems)
    _check_questions(conversation, turn_ids=turn_ids, where=where, problems=problems)


def _check_sessions(
    conversation: Mapping[str, Any], *, speakers: set[str], where: str, problems: list[str]
) -> set[str]:
    """Check the sessions and their turns; returns the conversation's turn ids."""
    session_ids: set[str] = set()
    turn_ids: set[str] = set()
    for index, session in enumerate(_check_list(conversation, "sessions", where=where, problems=problems)):
        here = f"{where} > {_place('sessions', index, session)}"
        if not isinstance(session, Mapping):
            problems.append(f"{here}: must be an object")
            continue
        _check_id(session, where=here, problems=problems)
        _check_unique(session.get("id"), session_ids, what="session", where=here, problems=problems)
        if not isinstance(session.get("date"), str) or not _is_iso_date(session["date"]):
            problems.append(f"{here}: date: must be an ISO 8601 date such as 2023-05-08 (or 2023-05-08T14:30)")
        for position, turn in enumerate(_check_list(session, "turns", where=here, problems=problems)):
            _check_turn(
                turn,
                speakers=speakers,
                turn_ids=turn_ids,
                where=f"{here} > {_place('turns', position, turn)}",
                problems=problems,
            )
    return turn_ids


def _check_turn(turn: Any, *, speakers: set[str], turn_ids: set[str], where: str, problems: list[str]) -> None:
    if not isinstance(turn, Mapping):
        problems.append(f"{where}: must be an object")
        return
    _check_id(turn, where=where, problems=problems)
    _check_unique(turn.get("id"), turn_ids, what="turn", where=where, problems=problems)
    if turn.get("speaker") not in speakers:
        problems.append(f"{where}: speaker: {turn.get('speaker')!r} is not one of the conversation's speakers")
    _check_text(turn, "text", where=where, problems=problems)
    caption = turn.get("image_caption")
    if caption is not None and not isinstance(caption, str):
        problems.append(f"{where}: image_caption: must be a string when given")


def _check_unique(value: Any, seen: set[str], *, what: str, where: str, problems: list[str]) -> None:
    if not isinstance(value, str):
        return
    if value in seen:
        problems.append(f"{where}: id: another {what} of this conversation has the id {value!r}")
    seen.add(value)


def _check_questions(conversation: Mapping[str, Any], *, turn_ids: set[str], where: str, problems: list[str]) -> None:
    question_ids: set[str] = set()
    for index, question in enumerate(_check_list(conversation, "questions", where=where, problems=problems)):
        here = f"{where} > {_place('questions', index, question)}"
        if not isinstance(question, Mapping):
            problems.append(f"{here}: must be an object")
            continue
        _check_id(question, where=here, problems=problems)
        _check_unique(question.get("id"), question_ids, what="question", where=here, problems=problems)
        _check_text(question, "question", where=here, problems=problems)
        if question.get("category") not in CATEGORIES:
            problems.append(f"{here}: category: {question.get('category')!r} is not one of {', '.join(CATEGORIES)}")
        for position, turn_id in enumerate(_check_list(question, "evidence", where=here, problems=problems)):
            if turn_id not in turn_ids:
                problems.append(f"{here}: evidence[{position}]: no turn of this conversation has the id {turn_id!r}")


def _is_iso_date(value: str) -> bool:
    try:
        session_time(value)
    except ValueError:
        return False
    return True


def session_time(date: str) -> datetime:
    """When a session took place, as an aware datetime: its ISO 8601 `date` (a day is its
    midnight), read as UTC when it has no offset. ValueError when it is not such a date."""
    moment = datetime.fromisoformat(date)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _conversation(data: Mapping[str, Any]) -> Conversation:
    """A validated conversation with only the fields of the format (evidence listed once each)."""
    return Conversation(
        id=data["id"],
        speakers=list(data["speakers"]),
        sessions=[
            EvalSession(id=session["id"], date=session["date"], turns=[_turn(turn) for turn in session["turns"]])
            for session in data["sessions"]
        ],
        questions=[
            Question(
                id=question["id"],
                question=question["question"],
                evidence=list(dict.fromkeys(question["evidence"])),
                category=question["category"],
            )
            for question in data["questions"]
        ],
    )


def _turn(data: Mapping[str, Any]) -> Turn:
    turn = Turn(id=data["id"], speaker=data["speaker"], text=data["text"])
    if data.get("image_caption"):
        turn["image_caption"] = data["image_caption"]
    return turn
