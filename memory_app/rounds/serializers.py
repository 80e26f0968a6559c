"""Input validation and output shapes of the rounds, posts, shared memory and scratch API."""

from __future__ import annotations

import json
from typing import Any

import yaml
from rest_framework import serializers
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer

from memory_app.conversations.models import Message
from memory_app.conversations.serializers import MAX_TEXT_CHARS, OccurredAtField
from memory_app.facts.serializers import StrictCharField
from memory_app.rounds import selectors as round_selectors
from memory_app.rounds.models import Post, Round, ScratchEntry, SharedMemoryEntry
from memory_app.rounds.services import ROUND_ID, ROUND_ID_RULE, SHARED_MEMORY_TYPE, shared_entry_problem
from memory_client.vocabulary.conversation import ATTACHMENT_TYPES
from memsite import safe_yaml
from memsite.parsers import INT_MAX, check_body

ID_CHARS = 64
ROLE_CHARS = 200
MAX_ATTACHMENTS = 100


def _text(**kwargs: Any) -> StrictCharField:
    return StrictCharField(max_length=MAX_TEXT_CHARS, allow_blank=True, trim_whitespace=False, **kwargs)


# --- rounds ---------------------------------------------------------------------------------


class RoundInputSerializer(serializers.Serializer):
    user_query = _text()
    id = StrictCharField(max_length=ID_CHARS, required=False, help_text="Client-chosen round id; makes retries safe.")
    state = serializers.ChoiceField(choices=Round.State.choices, default=Round.State.CREATED)

    def validate_id(self, value: str) -> str:
        if not ROUND_ID.fullmatch(value):
            raise serializers.ValidationError(ROUND_ID_RULE)
        return value


class RoundStateSerializer(serializers.Serializer):
    state = serializers.ChoiceField(choices=Round.State.choices)


class RoundListQuerySerializer(serializers.Serializer):
    role = serializers.CharField(
        required=False,
        max_length=ROLE_CHARS,
        help_text="TaskWeaver's get_role_rounds: every round, with only the posts this role sent or received.",
    )
    include_failure_rounds = serializers.BooleanField(
        required=False, allow_null=True, default=None, help_text="Default: false with `role`, true without."
    )
    after = serializers.IntegerField(
        required=False, min_value=0, max_value=INT_MAX, help_text="Cursor: rounds with order > after."
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=100)


class AttachmentInputSerializer(serializers.Serializer):
    id = StrictCharField(max_length=ID_CHARS, required=False)
    type = serializers.ChoiceField(choices=ATTACHMENT_TYPES)
    content = _text(required=False, default="")
    extra = serializers.JSONField(required=False, allow_null=True, default=None)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["type"] == SHARED_MEMORY_TYPE and (problem := shared_entry_problem(attrs.get("extra"))):
            raise serializers.ValidationError({"extra": [problem]})
        return attrs


class PostInputSerializer(serializers.Serializer):
    message = _text()
    send_from = StrictCharField(max_length=ROLE_CHARS)
    send_to = StrictCharField(max_length=ROLE_CHARS)
    attachment_list = AttachmentInputSerializer(many=True, required=False, default=list)
    id = StrictCharField(max_length=ID_CHARS, required=False, help_text="The post id (generated: post-...).")
    message_id = serializers.UUIDField(required=False, help_text="Client-chosen message id; makes retries safe.")
    role = serializers.ChoiceField(
        choices=Message.Role.choices,
        required=False,
        help_text='Chat role of the message; default "user" from User, else "assistant" (never "tool").',
    )
    occurred_at = OccurredAtField()

    def validate_role(self, value: str) -> str:
        if value == Message.Role.TOOL:
            raise serializers.ValidationError("a post cannot be a tool result (it answers no tool call)")
        return value

    def validate_attachment_list(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(value) > MAX_ATTACHMENTS:
            raise serializers.ValidationError(f"at most {MAX_ATTACHMENTS} attachments per post")
        return value


class AttachmentOutputSerializer(serializers.Serializer):
    id = serializers.CharField()
    type = serializers.CharField()
    content = serializers.CharField()
    extra = serializers.JSONField(allow_null=True)

    def to_representation(self, instance: Any) -> dict[str, Any]:
        return round_selectors.attachment_dict(instance)


class PostOutputSerializer(serializers.Serializer):
    """Post.to_dict plus where the post sits among the session's messages."""

    id = serializers.CharField()
    message = serializers.CharField()
    send_from = serializers.CharField()
    send_to = serializers.CharField()
    attachment_list = AttachmentOutputSerializer(many=True)
    message_id = serializers.UUIDField()
    seq = serializers.IntegerField()
    role = serializers.CharField()
    round = serializers.CharField()

    def to_representation(self, instance: Post) -> dict[str, Any]:
        return {
            **round_selectors.post_dict(instance),
            "message_id": str(instance.message.pk),
            "seq": int(instance.message.seq),
            "role": instance.message.role,
            "round": instance.round_id,
        }


class RoundOutputSerializer(serializers.Serializer):
    """Round.to_dict plus its order and times."""

    id = serializers.CharField()
    user_query = serializers.CharField()
    state = serializers.CharField()
    post_list = PostOutputSerializer(many=True)
    order = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    def to_representation(self, instance: Round) -> dict[str, Any]:
        posts = getattr(instance, "posts_read", [])
        out = round_selectors.round_dict(instance)
        out["post_list"] = PostOutputSerializer(posts, many=True).data
        out["order"] = instance.order
        out["created_at"] = serializers.DateTimeField().to_representation(instance.created_at)
        out["updated_at"] = serializers.DateTimeField().to_representation(instance.updated_at)
        return out


# --- shared memory ----------------------------------------------------------------------------


class SharedMemoryInputSerializer(serializers.Serializer):
    type = StrictCharField(max_length=100)
    content = _text()
    scope = serializers.ChoiceField(choices=SharedMemoryEntry.Scope.choices)
    round = StrictCharField(max_length=ID_CHARS, required=False, help_text="Default: the current (latest) round.")
    created_by = StrictCharField(max_length=ROLE_CHARS, required=False, allow_blank=True)
    id = StrictCharField(max_length=ID_CHARS, required=False)


class SharedMemoryQuerySerializer(serializers.Serializer):
    type = serializers.CharField(required=False, max_length=100)
    latest_per_role = serializers.BooleanField(required=False, default=True)


class SharedMemoryOutputSerializer(serializers.Serializer):
    type = serializers.CharField()
    content = serializers.CharField()
    scope = serializers.CharField()
    id = serializers.CharField()
    round = serializers.CharField(allow_null=True)
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()

    def to_representation(self, instance: SharedMemoryEntry) -> dict[str, Any]:
        out = round_selectors.entry_dict(instance)
        out["created_at"] = serializers.DateTimeField().to_representation(instance.created_at)
        return out


# --- scratch ------------------------------------------------------------------------------------


class ScratchInputSerializer(serializers.Serializer):
    action = StrictCharField(max_length=200)
    observation = serializers.JSONField(required=False, allow_null=True, default=None)
    duration = serializers.FloatField(required=False, allow_null=True, min_value=0, default=None)

    def validate_observation(self, value: Any) -> Any:
        if len(json.dumps(value, ensure_ascii=False)) > MAX_TEXT_CHARS:
            raise serializers.ValidationError(f"longer than {MAX_TEXT_CHARS} characters as JSON")
        return value


class ScratchOutputSerializer(serializers.Serializer):
    action = serializers.CharField()
    observation = serializers.JSONField(allow_null=True)
    duration = serializers.FloatField(allow_null=True)
    after_seq = serializers.IntegerField()

    def to_representation(self, instance: ScratchEntry) -> dict[str, Any]:
        return {**instance.data, "after_seq": int(instance.after_seq)}


# --- conversation as JSON or YAML -----------------------------------------------------------------


class YAMLRenderer(BaseRenderer):
    media_type = "application/yaml"
    format = "yaml"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        if data is None:
            return b""
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False).encode()


class YAMLParser(BaseParser):
    """YAML request bodies, read with safe tags only (no Python objects, ever), bounded in size and aliases."""

    media_type = "application/yaml"

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        from rest_framework.exceptions import ParseError

        try:
            data = yaml.load(safe_yaml.read_body(stream).decode("utf-8"), Loader=safe_yaml.BoundedSafeLoader)  # noqa: S506
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise ParseError(f"YAML parse error: {exc}") from exc
        except RecursionError as exc:
            raise ParseError("YAML parse error: nested too deeply") from exc
        # JSON's data model from here on: YAML's dates and timestamps become their text.
        try:
            document = json.loads(json.dumps(data, default=str, allow_nan=False))
        except (TypeError, ValueError) as exc:
            raise ParseError(f"YAML value JSON cannot hold: {exc}") from exc
        return check_body(document)


class TextYAMLParser(YAMLParser):
    media_type = "text/yaml"


class ImportResultSerializer(serializers.Serializer):
    session_id = serializers.UUIDField()
    rounds = serializers.IntegerField()
    posts = serializers.IntegerField()
    warnings = serializers.ListField(child=serializers.CharField())
