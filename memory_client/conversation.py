"""The conversation data model: Conversation > Round > Post > Attachment, and SharedMemoryEntry.

Pure dataclasses (no HTTP, no Django): the server validates attachment types against the same
`AttachmentType` (memory_client.vocabulary), and `to_dict`/`from_dict` give the conversation
file shapes, which is also what `GET /api/v1/sessions/{id}/conversation/` exports.

Backward compatible with older conversation files: `Attachment.from_dict` returns None for a
removed or unknown type (e.g. `init_plan`), and `Post.from_dict` leaves those out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from memory_client.vocabulary.conversation import (  # noqa: F401 - the client's public names
    ATTACHMENT_TYPES,
    ROUND_STATES,
    SCOPES,
    AttachmentType,
    RoundState,
    new_id,
)


@dataclass
class Attachment:
    type: AttachmentType
    content: str
    extra: Any = None
    id: str = field(default_factory=lambda: new_id("atta"))

    @staticmethod
    def create(type: AttachmentType | str, content: str, extra: Any = None, id: str | None = None) -> Attachment:
        kind = type if isinstance(type, AttachmentType) else AttachmentType(type)
        return Attachment(type=kind, content=content, extra=extra, id=id or new_id("atta"))

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "type": self.type.value, "content": self.content, "extra": self.extra}

    @staticmethod
    def from_dict(content: dict[str, Any]) -> Attachment | None:
        """None for a removed or unknown type (older files stay readable)."""
        if content.get("type") not in ATTACHMENT_TYPES:
            return None
        return Attachment.create(
            type=content["type"], content=content["content"], extra=content.get("extra"), id=content.get("id")
        )


@dataclass
class Post:
    send_from: str
    send_to: str
    message: str
    attachment_list: list[Attachment] = field(default_factory=list)
    id: str = field(default_factory=lambda: new_id("post"))

    @staticmethod
    def create(message: str, send_from: str, send_to: str, attachment_list: list[Attachment] | None = None) -> Post:
        return Post(send_from=send_from, send_to=send_to, message=message, attachment_list=list(attachment_list or []))

    def add_attachment(self, attachment: Attachment) -> None:
        self.attachment_list.append(attachment)

    def get_attachment(self, type: AttachmentType) -> list[Any]:
        return [attachment.content for attachment in self.attachment_list if attachment.type == type]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "message": self.message,
            "send_from": self.send_from,
            "send_to": self.send_to,
            "attachment_list": [attachment.to_dict() for attachment in self.attachment_list],
        }

    @staticmethod
    def from_dict(content: dict[str, Any]) -> Post:
        attachments = [Attachment.from_dict(item) for item in content.get("attachment_list") or []]
        return Post(
            id=content.get("id") or new_id("post"),
            message=content["message"],
            send_from=content["send_from"],
            send_to=content["send_to"],
            attachment_list=[attachment for attachment in attachments if attachment is not None],
        )


@dataclass
class Round:
    user_query: str
    state: RoundState = "created"
    post_list: list[Post] = field(default_factory=list)
    id: str = field(default_factory=lambda: new_id("round"))

    @staticmethod
    def create(user_query: str, id: str | None = None, state: RoundState = "created") -> Round:
        return Round(user_query=user_query, state=state, id=id or new_id("round"))

    def add_post(self, post: Post) -> None:
        self.post_list.append(post)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user_query": self.user_query,
            "state": self.state,
            "post_list": [post.to_dict() for post in self.post_list],
        }

    @staticmethod
    def from_dict(content: dict[str, Any]) -> Round:
        return Round(
            id=content.get("id") or new_id("round"),
            user_query=content["user_query"],
            state=content.get("state", "created"),
            post_list=[Post.from_dict(post) for post in content.get("post_list") or []],
        )


@dataclass
class SharedMemoryEntry:
    type: str
    content: str
    scope: Literal["round", "conversation"]
    id: str = field(default_factory=lambda: new_id("sme"))

    @staticmethod
    def create(
        type: str, content: str, scope: Literal["round", "conversation"], id: str | None = None
    ) -> SharedMemoryEntry:
        return SharedMemoryEntry(type=type, content=content, scope=scope, id=id or new_id("sme"))

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "content": self.content, "scope": self.scope, "id": self.id}

    @staticmethod
    def from_dict(content: dict[str, Any]) -> SharedMemoryEntry:
        return SharedMemoryEntry(
            type=content["type"],
            content=content["content"],
            scope=content["scope"],
            id=content.get("id") or new_id("sme"),
        )


@dataclass
class Conversation:
    id: str = field(default_factory=lambda: new_id("conv"))
    rounds: list[Round] = field(default_factory=list)
    plugins: list[Any] = field(default_factory=list)
    enabled: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "plugins": list(self.plugins),
            "enabled": self.enabled,
            "rounds": [round_.to_dict() for round_ in self.rounds],
        }

    @staticmethod
    def from_dict(content: dict[str, Any]) -> Conversation:
        return Conversation(
            id=content.get("id") or new_id("conv"),
            rounds=[Round.from_dict(round_) for round_ in content.get("rounds") or []],
            plugins=list(content.get("plugins") or []),
            enabled=content.get("enabled", True),
        )
