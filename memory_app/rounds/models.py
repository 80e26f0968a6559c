"""Rounds, posts' attachments, shared memory and pending scratch memory.

A post is a Message (one table: `Message.round`, `send_from`, `send_to`, `post_id`), so
context building, compaction and facts see posts like any other message. What a post adds
lives here: its typed attachments. Imported by memory_app.models.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import models

from memory_app.conversations.models import Message, Session
from memory_app.tenancy.models import Team
from memory_client.vocabulary.conversation import ATTACHMENT_TYPES, ROUND_STATES, SCOPES
from memsite.fields import VerbatimJSONField


class Round(models.Model):
    """One user query and the posts the roles exchanged to answer it."""

    # CREATED, FINISHED, FAILED: the round states the client speaks too.
    State = models.TextChoices(  # type: ignore[call-overload]  # functional API: members from the vocabulary
        "State", [(state.upper(), (state, state)) for state in ROUND_STATES]
    )

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="rounds")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="rounds")
    # The round's id ("round-..."): client-chosen or generated, unique in its session; the API's key.
    round_id = models.CharField(max_length=64)
    order = models.PositiveIntegerField()  # 1, 2, ... within the session
    user_query = models.TextField(blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.CREATED)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    posts_read: list[Post]  # not a column: the round's posts, set by round_selectors.attach_posts

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "round_id"], name="uniq_round_id_per_session"),
            models.UniqueConstraint(fields=["session", "order"], name="uniq_round_order_per_session"),
        ]
        ordering = ["order"]

    def __str__(self) -> str:
        return f"{self.round_id} ({self.state})"


class Attachment(models.Model):
    """Typed data on a post (the conversation model's Attachment): type, content and free-form extra."""

    TYPE_CHOICES = [(value, value) for value in ATTACHMENT_TYPES]

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="attachments")
    attachment_id = models.CharField(max_length=64)  # the conversation file's id ("atta-...")
    position = models.PositiveSmallIntegerField()  # order in the post's attachment_list
    type = models.CharField(max_length=40, choices=TYPE_CHOICES)
    content = models.TextField(blank=True)
    extra = VerbatimJSONField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["message", "position"], name="uniq_attachment_position")]
        ordering = ["message", "position"]

    def __str__(self) -> str:
        return f"{self.type}: {self.content[:40]}"


@dataclass(frozen=True)
class Post:
    """A post as the rounds code reads it: its message, its attachments in list order and its
    round's id. A record of its own, so that nothing here sets attributes on conversations' Message."""

    message: Message
    attachments: list[Attachment]
    round_id: str  # the round's own id ("round-..."), not Message.round_id (the row's key)


class SharedMemoryEntry(models.Model):
    """Cross-role data: a plan, an experience path ... effective in its round or the whole conversation.

    Written directly (`POST .../shared-memory/`) or by a post's `shared_memory_entry`
    attachment (then `attachment` links it, and the post's sender is `created_by`).
    """

    # ROUND, CONVERSATION: the shared-memory scopes the client speaks too.
    Scope = models.TextChoices(  # type: ignore[call-overload]  # functional API: members from the vocabulary
        "Scope", [(scope.upper(), (scope, scope)) for scope in SCOPES]
    )

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="shared_memory_entries")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="shared_memory_entries")
    round = models.ForeignKey(
        Round, on_delete=models.CASCADE, related_name="shared_memory_entries", null=True, blank=True
    )
    attachment = models.OneToOneField(
        Attachment, on_delete=models.CASCADE, related_name="shared_memory_entry", null=True, blank=True
    )
    entry_id = models.CharField(max_length=64)  # the conversation file's id ("sme-...")
    type = models.CharField(max_length=100)
    scope = models.CharField(max_length=16, choices=Scope.choices)
    content = models.TextField(blank=True)
    created_by = models.CharField(max_length=200, blank=True)  # the role that wrote it
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "entry_id"], name="uniq_shared_entry_id")]
        indexes = [models.Index(fields=["session", "type"], name="shared_entry_session_type")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.type} ({self.scope}) by {self.created_by or '?'}"


class ScratchEntry(models.Model):
    """A tool execution of the current turn, waiting for the turn's final answer.

    `after_seq` is the session's last seq when it was recorded (read under the session-row
    lock every append takes), so "the final answer" is exact: the first assistant message
    without tool calls with a larger seq. It is deleted when copied into that message's
    `meta.scratch`.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="scratch_entries")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="scratch_entries")
    after_seq = models.PositiveBigIntegerField()
    data = VerbatimJSONField()  # {"action", "observation", "duration"} as recorded
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["session", "after_seq"], name="scratch_session_after")]
        ordering = ["id"]

    def __str__(self) -> str:
        return f"scratch after #{self.after_seq} ({self.session_id})"
