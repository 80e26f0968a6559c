"""Input validation and output shapes of the conversation memory API."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from memory_app.compaction import config as memory_config
from memory_app.conversations.images import ImageRejected, validate_image_ref
from memory_app.conversations.models import MemoryType, Message, Session
from memory_app.conversations.services import MESSAGE_FIELDS, split_system_prompt
from memory_app.search.models import SearchKind
from memory_app.search.recall import session_recall_settings
from memory_client.vocabulary.messages import tool_call_id_in_content
from memsite.parsers import INT_MAX

MAX_TEXT_CHARS = 2_000_000
_PART_TYPES = ("text", "image_url", "input_audio", "file", "refusal")
OCCURRED_AT_MAX_AHEAD = timedelta(days=1)


def _check_image(ref: object) -> str:
    try:
        return validate_image_ref(ref, max_bytes=settings.MAX_IMAGE_BYTES)
    except ImageRejected as exc:
        raise serializers.ValidationError(str(exc)) from exc


def _validate_part(part: object) -> dict[str, Any]:
    if not isinstance(part, dict):
        raise serializers.ValidationError("each content part must be an object")
    kind = part.get("type")
    if kind not in _PART_TYPES:
        raise serializers.ValidationError(f"type must be one of {', '.join(_PART_TYPES)}")
    if kind == "text" and not isinstance(part.get("text"), str):
        raise serializers.ValidationError("a text part needs a string 'text'")
    if kind == "image_url":
        image = part.get("image_url")
        if not isinstance(image, dict):
            raise serializers.ValidationError("an image_url part needs an object 'image_url' with 'url'")
        _check_image(image.get("url"))
    return part


@extend_schema_field(memory_config.json_schema())
class MemoryConfigField(serializers.JSONField):
    """A session's managed-memory settings, documented setting by setting (validated by the service)."""


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "object", "additionalProperties": True}},
            {"type": "object", "additionalProperties": True},
        ],
        "nullable": True,
    }
)
class ContentField(serializers.Field):
    """A string, null, a list of OpenAI content parts, or a JSON object (marsys's dict content)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str):
            if len(data) > MAX_TEXT_CHARS:
                raise serializers.ValidationError(f"content longer than {MAX_TEXT_CHARS} characters")
            return data
        if isinstance(data, list):
            errors: dict[int, Any] = {}
            for index, part in enumerate(data):
                try:
                    _validate_part(part)
                except serializers.ValidationError as exc:
                    errors[index] = exc.detail
            if errors:
                raise serializers.ValidationError([errors.get(i, []) for i in range(len(data))])
            return data
        if isinstance(data, dict):
            return data
        raise serializers.ValidationError("must be a string, null, a list of content parts or an object")

    def to_representation(self, value: Any) -> Any:
        return value


class OccurredAtField(serializers.DateTimeField):
    """When a message was said: an ISO 8601 datetime with its offset, at most a day ahead.

    A naive time is refused rather than read in the server's zone: an imported history's
    dates would otherwise all shift by the difference, silently. The day of slack covers
    clock skew and time zones; anything later is a typo or a wrong epoch.
    """

    default_error_messages = {
        "naive": "must include a timezone (an offset such as +02:00, or Z)",
        "future": "must not be more than a day in the future",
    }

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("allow_null", True)
        kwargs.setdefault(
            "help_text",
            "When the message was said (ISO 8601 with a timezone, at most a day ahead); null when not known. "
            "Search filters and ranks messages by it (else by created_at).",
        )
        super().__init__(**kwargs)

    def enforce_timezone(self, value: datetime) -> datetime:
        # DRF would make a naive time aware in the server's zone; refuse it before that happens.
        if timezone.is_naive(value):
            self.fail("naive")
        return super().enforce_timezone(value)

    def to_internal_value(self, value: Any) -> datetime:
        moment = super().to_internal_value(value)
        if moment > timezone.now() + OCCURRED_AT_MAX_AHEAD:
            self.fail("future")
        return moment


class ToolFunctionSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    arguments = serializers.CharField(allow_blank=True, trim_whitespace=False)

    def validate_arguments(self, value: str) -> str:
        # Models sometimes emit invalid JSON; OpenAI stores it as given, so do we, but an
        # argument string must at least be text that a JSON parser could be handed.
        if "\x00" in value:
            raise serializers.ValidationError("must not contain NUL bytes")
        return value


class ToolCallSerializer(serializers.Serializer):
    id = serializers.CharField(max_length=200)
    type = serializers.ChoiceField(choices=["function"], default="function")
    function = ToolFunctionSerializer()


class AgentCallSerializer(serializers.Serializer):
    agent_name = serializers.CharField(max_length=200)
    request = serializers.JSONField()


class SparseValidationMixin:
    """Validate with copies of only the fields a body sets, plus required or defaulted ones.

    DRF deep-copies every declared field (nested serializers included) for each serializer
    instance before validating; for a message that is 14 fields, most of an append's
    validation time, although a field the body leaves out, not required and without a
    default, only ever raises SkipField. Same values, same errors, same order: the fields
    are the declared ones, copied the way DRF copies them, in declaration order. Anything
    that reads `.fields` (schema generation, `.data`) still gets all of them.
    """

    _declared_fields: dict[str, serializers.Field]

    def to_internal_value(self, data: Any) -> Any:
        self._body_keys = set(data) if isinstance(data, Mapping) else None
        return super().to_internal_value(data)  # type: ignore[misc]

    @property
    def _writable_fields(self) -> Iterator[serializers.Field]:
        keys = getattr(self, "_body_keys", None)
        if keys is None or "fields" in self.__dict__:  # not a mapping, or all fields built already
            yield from super()._writable_fields  # type: ignore[misc]
            return
        copies: dict[str, serializers.Field] = self.__dict__.setdefault("_sparse_fields", {})
        for name, declared in self._declared_fields.items():
            if declared.read_only or not (name in keys or declared.required or declared.default is not empty):
                continue
            if name not in copies:
                copies[name] = copy.deepcopy(declared)
                copies[name].bind(field_name=name, parent=self)  # type: ignore[arg-type]
            yield copies[name]

    def _read_only_defaults(self) -> dict[str, Any]:
        if not any(field.read_only for field in self._declared_fields.values()):
            return {}
        return super()._read_only_defaults()  # type: ignore[misc]


TOOL_CALL_ID_MAX = 200


class MessageInputSerializer(  # type: ignore[misc]  # DRF's _writable_fields is a generator (stub: list)
    SparseValidationMixin, serializers.Serializer
):
    """One message in OpenAI chat format plus the multi-agent fields (agent_calls, structured_data, send_from, ...)."""

    message_id = serializers.UUIDField(required=False, help_text="Client-chosen id; makes retries idempotent.")
    role = serializers.ChoiceField(choices=Message.Role.choices)
    content = ContentField()
    name = serializers.CharField(max_length=200, required=False, allow_null=True)
    tool_calls = ToolCallSerializer(many=True, required=False, allow_null=True, allow_empty=True)
    tool_call_id = serializers.CharField(max_length=TOOL_CALL_ID_MAX, required=False, allow_null=True)
    agent_calls = AgentCallSerializer(many=True, required=False, allow_null=True)
    structured_data = serializers.JSONField(required=False, allow_null=True)
    reasoning_details = serializers.ListField(child=serializers.DictField(), required=False, allow_null=True)
    images = serializers.ListField(child=serializers.JSONField(), required=False, allow_null=True)
    send_from = serializers.CharField(max_length=200, required=False, allow_null=True)
    send_to = serializers.CharField(max_length=200, required=False, allow_null=True)
    meta = serializers.JSONField(required=False, allow_null=True)
    occurred_at = OccurredAtField()

    def validate_images(self, value: list[Any] | None) -> list[str] | None:
        if not value:
            return None
        errors: dict[int, list[str]] = {}
        for index, ref in enumerate(value):
            try:
                _check_image(ref)
            except serializers.ValidationError as exc:
                assert isinstance(exc.detail, list)  # _check_image raises ValidationError(str): a one-item list
                errors[index] = [str(exc.detail[0])]
        if errors:
            raise serializers.ValidationError([errors.get(i, []) for i in range(len(value))])
        return value

    def validate_structured_data(self, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError("must be an object")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("tool_calls") == []:
            attrs["tool_calls"] = None
        # On PATCH the rules apply to the message as it will be, stored fields included.
        role, tool_call_id, tool_calls = (
            attrs.get(name, getattr(self.instance, name, None)) for name in ("role", "tool_call_id", "tool_calls")
        )
        if role == Message.Role.TOOL and not tool_call_id:
            # A tool result written as JSON text names the call it answers in its content.
            tool_call_id = tool_call_id_in_content(attrs.get("content", getattr(self.instance, "content", None)))
            if tool_call_id is not None and len(tool_call_id) > TOOL_CALL_ID_MAX:
                raise serializers.ValidationError(
                    {"tool_call_id": [f"the content's tool_call_id is longer than {TOOL_CALL_ID_MAX} characters"]}
                )
            if tool_call_id is not None:
                attrs["tool_call_id"] = tool_call_id
        if role == Message.Role.TOOL and not tool_call_id:
            raise serializers.ValidationError({"tool_call_id": ["required for role 'tool'"]})
        if role != Message.Role.TOOL and tool_call_id:
            raise serializers.ValidationError({"tool_call_id": ["only messages with role 'tool' answer a tool call"]})
        if tool_calls and role != Message.Role.ASSISTANT:
            raise serializers.ValidationError({"tool_calls": ["only assistant messages make tool calls"]})
        ids = [call["id"] for call in attrs.get("tool_calls") or []]
        if len(ids) != len(set(ids)):
            raise serializers.ValidationError({"tool_calls": ["tool call ids must be unique"]})
        return attrs


class MessageBatchSerializer(serializers.Serializer):
    messages = MessageInputSerializer(many=True, allow_empty=False)

    def validate_messages(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if len(value) > settings.MAX_MESSAGES_PER_REQUEST:
            raise serializers.ValidationError(f"at most {settings.MAX_MESSAGES_PER_REQUEST} messages per request")
        ids = [m["message_id"] for m in value if m.get("message_id")]
        if len(ids) != len(set(ids)):
            raise serializers.ValidationError("message_id values must be unique within a request")
        return value


class MessageOutputSerializer(serializers.ModelSerializer):
    message_id = serializers.UUIDField(source="id", read_only=True)
    content = ContentField(read_only=True)
    tool_calls = serializers.JSONField(read_only=True)
    agent_calls = serializers.JSONField(read_only=True)
    structured_data = serializers.JSONField(read_only=True)
    reasoning_details = serializers.JSONField(read_only=True)
    images = serializers.JSONField(read_only=True)
    meta = serializers.JSONField(read_only=True)
    session_id = serializers.UUIDField(read_only=True)
    occurred_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When the message was said, as written; null when not given."
    )

    class Meta:
        model = Message
        fields = [
            "message_id",
            "session_id",
            "seq",
            *MESSAGE_FIELDS,
            "token_count",
            "occurred_at",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class AppendedSerializer(serializers.Serializer):
    message_id = serializers.UUIDField(source="id")
    seq = serializers.IntegerField()
    token_count = serializers.IntegerField()

    def to_representation(self, instance: Message) -> dict[str, Any]:
        # Every append answers with this. The fields above document it (OpenAPI); writing
        # the three values directly gives the same JSON without copying and running those
        # fields per response, which cost as much as validating the message.
        return {"message_id": str(instance.id), "seq": int(instance.seq), "token_count": int(instance.token_count)}


def metadata_object(value: Any) -> dict[str, Any]:
    """A session's metadata: a JSON object of at most 64 KiB."""
    if not isinstance(value, dict):
        raise serializers.ValidationError("must be an object")
    if len(json.dumps(value)) > 64 * 1024:
        raise serializers.ValidationError("must serialize to at most 64 KiB")
    return value


class RecallSettingsSerializer(serializers.Serializer):
    """Automatic recall: each context read adds the memories most relevant to the latest user message."""

    auto = serializers.BooleanField(default=False, help_text="recall on every context read (off by default)")
    k = serializers.IntegerField(default=5, min_value=1, max_value=20, help_text="memories per read")
    kinds = serializers.ListField(
        child=serializers.ChoiceField(choices=SearchKind.choices),
        default=list,
        help_text="kinds to recall from (empty: all)",
    )


class SessionInputSerializer(serializers.Serializer):
    system_prompt = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=MAX_TEXT_CHARS
    )
    external_id = serializers.CharField(required=False, allow_null=True, max_length=200)
    metadata = serializers.JSONField(required=False)
    memory_type = serializers.ChoiceField(choices=MemoryType.choices, required=False)
    # an object (MemoryManager.save_to_file's additional_state) or null; never a list or a scalar
    additional_state = serializers.DictField(required=False, allow_null=True)
    memory_config = MemoryConfigField(
        required=False, help_text="The managed-memory settings (partial; defaults fill the rest)."
    )
    recall = RecallSettingsSerializer(required=False)

    def validate_memory_config(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be an object")
        return value

    def validate_metadata(self, value: Any) -> Any:
        return metadata_object(value)


class SessionOutputSerializer(serializers.ModelSerializer):
    message_count = serializers.SerializerMethodField()
    metadata = serializers.JSONField(read_only=True)
    additional_state = serializers.JSONField(read_only=True)
    memory_config = MemoryConfigField(read_only=True)
    recall = serializers.SerializerMethodField()

    @extend_schema_field(RecallSettingsSerializer)
    def get_recall(self, session: Session) -> dict[str, Any]:
        settings = session_recall_settings(session)
        return {"auto": settings.auto, "k": settings.k, "kinds": list(settings.kinds)}

    class Meta:
        model = Session
        fields = [
            "id",
            "external_id",
            "system_prompt",
            "metadata",
            "additional_state",
            "memory_type",
            "memory_config",
            "recall",
            "compaction_threshold",
            "active_tokens",
            "message_count",
            "last_seq",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "compaction_threshold": {
                "help_text": "The active-context size over which an append queues a compaction; null when appends "
                "never do (not a managed session, summarization off, or `add` not in trigger_events)."
            },
            "active_tokens": {
                "help_text": "The active context: system prompt + latest summary (with the original instruction it "
                "keeps) + every message after it, from cached counts; the figure `threshold_tokens` is compared "
                "with. `/context/`'s token_count is the served window: this plus 3 reply-priming tokens while "
                "nothing is packed."
            },
        }

    def get_message_count(self, session: Session) -> int:
        annotated = getattr(session, "message_count", None)
        return annotated if annotated is not None else session.messages.count()


class SessionListQuerySerializer(serializers.Serializer):
    external_id = serializers.CharField(required=False)
    created_after = serializers.DateTimeField(required=False)
    created_before = serializers.DateTimeField(required=False)
    memory_type = serializers.ChoiceField(choices=MemoryType.choices, required=False)
    search = serializers.CharField(required=False)


class MessageListQuerySerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Message.Role.choices, required=False)
    after = serializers.IntegerField(
        required=False, min_value=0, max_value=INT_MAX, help_text="Cursor: return messages with seq > after."
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=100)
    last = serializers.IntegerField(required=False, min_value=1, max_value=10000)


class ContextQuerySerializer(serializers.Serializer):
    last = serializers.IntegerField(required=False, min_value=1, max_value=10000)
    max_tokens = serializers.IntegerField(required=False, min_value=1, max_value=INT_MAX)
    agent = serializers.CharField(
        required=False,
        max_length=200,
        help_text="Who the context is for, in the usage figures (default: the key's agent name, else "
        "the session's metadata.agent_name).",
    )
    recall = serializers.CharField(
        required=False,
        max_length=1000,
        help_text="Add one 'relevant memory' message after the system prompt: the team's memories most relevant "
        "to this text (hybrid search), inside max_tokens. Without it, the session's automatic recall (if on) "
        "uses its latest user message.",
    )
    recall_k = serializers.IntegerField(required=False, min_value=1, max_value=20, help_text="memories to recall (5)")
    include_failure_rounds = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Serve the posts of failed rounds too (left out by default, as a role's rounds leave them out).",
    )
    recall_kinds = serializers.CharField(
        required=False, help_text="comma-separated kinds to recall from (message, summary, fact, record, ...)"
    )

    def validate_recall_kinds(self, value: str) -> list[str]:
        kinds = [kind.strip() for kind in value.split(",") if kind.strip()]
        unknown = sorted(set(kinds) - set(SearchKind.values))
        if not kinds or unknown:
            raise serializers.ValidationError(
                f"unknown kind(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(SearchKind.values)}"
            )
        return kinds


class RecalledMemorySerializer(serializers.Serializer):
    kind = serializers.CharField()
    id = serializers.CharField()
    item_id = serializers.IntegerField()
    session = serializers.UUIDField(allow_null=True)
    seq = serializers.IntegerField(allow_null=True)
    score = serializers.FloatField()


class ContextRecallSerializer(serializers.Serializer):
    query = serializers.CharField()
    automatic = serializers.BooleanField(help_text="from the session's automatic recall (its latest user message)")
    memories = RecalledMemorySerializer(many=True)
    token_count = serializers.IntegerField()


class ContextOutputSerializer(serializers.Serializer):
    context_id = serializers.UUIDField(help_text="Names this answer: GET /contexts/{context_id}/ replays it.")
    messages = serializers.ListField(child=serializers.DictField())
    token_count = serializers.IntegerField()
    recall = ContextRecallSerializer(required=False, help_text="present when recall put memories in the context")


class ImportedSessionSerializer(serializers.Serializer):
    """The `session` object of an export: only these fields are taken, validated as on create
    (anything else in it, such as the old id, is ignored)."""

    external_id = serializers.CharField(required=False, allow_null=True, max_length=200)
    metadata = serializers.JSONField(required=False)

    def validate_metadata(self, value: Any) -> Any:
        return metadata_object(value)


class ImportSerializer(serializers.Serializer):
    memory_type = serializers.ChoiceField(choices=MemoryType.choices, default=MemoryType.CONVERSATION_HISTORY)
    messages = serializers.ListField(child=serializers.DictField(), allow_empty=True)
    additional_state = serializers.DictField(required=False, allow_null=True)
    timestamp = serializers.FloatField(required=False)
    session = ImportedSessionSerializer(required=False)

    def validate_messages(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        # The first system message becomes the session's system prompt; the rest are
        # validated as ordinary messages (message ids from another session are dropped).
        _, body = split_system_prompt(value)
        messages = [{k: v for k, v in m.items() if k != "message_id"} for m in body]
        batch = MessageInputSerializer(data=messages, many=True)
        if not batch.is_valid():
            offset = len(value) - len(body)
            errors = batch.errors
            indexed = errors.items() if isinstance(errors, dict) else enumerate(errors)  # DRF >= 3.16 uses dicts
            raise serializers.ValidationError(
                {offset + int(i): e for i, e in indexed if e}  # type: ignore[misc]  # int keys like DRF's (stub: str)
            )
        head = value[: len(value) - len(body)]
        return head + list(batch.validated_data)
