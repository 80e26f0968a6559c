"""Input validation and output shapes of the facts API."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import serializers

from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.facts.output import MAX_FIELD_CHARS
from memory_app.jobs.serializers import WorkerOutputSerializer
from memsite.parsers import INT_MAX

MAX_ROLE_CHARS = 200


class StrictCharField(serializers.CharField):
    """A CharField that refuses numbers and booleans instead of turning them into text."""

    default_error_messages = {"invalid": "must be a string"}

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    default_error_messages = {"invalid": "must be a number"}

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "must be an integer"}

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    default_error_messages = {"invalid": "must be true or false"}

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid")
        return data


def _term(**kwargs: Any) -> StrictCharField:
    return StrictCharField(max_length=MAX_FIELD_CHARS, **kwargs)


class FactInputSerializer(serializers.Serializer):
    role = StrictCharField(max_length=MAX_ROLE_CHARS)
    subject = _term()
    predicate = _term()
    object = _term()
    session = serializers.UUIDField(required=False, allow_null=True, help_text="Omit for a team-wide fact.")
    confidence = StrictFloatField(required=False, allow_null=True, min_value=0.0, max_value=1.0)
    replaces = StrictBooleanField(
        required=False,
        default=False,
        help_text="This value replaces the live values of the same subject and predicate in its scope (they are "
        "invalidated, never deleted), as a single-valued predicate's new value does.",
    )


class FactPatchSerializer(serializers.Serializer):
    role = StrictCharField(max_length=MAX_ROLE_CHARS, required=False)
    subject = _term(required=False)
    predicate = _term(required=False)
    object = _term(required=False)
    confidence = StrictFloatField(required=False, allow_null=True, min_value=0.0, max_value=1.0)
    invalidated = StrictBooleanField(required=False, help_text="false restores an invalidated fact.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            raise serializers.ValidationError("nothing to change")
        return attrs


class FactOutputSerializer(serializers.ModelSerializer):
    session = serializers.UUIDField(source="session_id", read_only=True, allow_null=True)
    source_message = serializers.UUIDField(source="source_message_id", read_only=True, allow_null=True)
    extraction_run = serializers.UUIDField(source="extraction_run_id", read_only=True, allow_null=True)
    invalidated_by = serializers.UUIDField(source="invalidated_by_id", read_only=True, allow_null=True)

    class Meta:
        model = Fact
        fields = [
            "id",
            "session",
            "role",
            "subject",
            "predicate",
            "object",
            "source_message",
            "extraction_run",
            "extractor",
            "confidence",
            "curated",
            "times_seen",
            "last_seen_at",
            "valid_from",
            "invalidated_at",
            "invalidated_by",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


class FactListQuerySerializer(serializers.Serializer):
    subject = serializers.CharField(required=False, max_length=MAX_FIELD_CHARS)
    predicate = serializers.CharField(required=False, max_length=MAX_FIELD_CHARS)
    object = serializers.CharField(required=False, max_length=MAX_FIELD_CHARS)
    role = serializers.CharField(required=False, max_length=MAX_ROLE_CHARS)
    session = serializers.UUIDField(required=False)
    q = serializers.CharField(required=False, max_length=MAX_FIELD_CHARS, help_text="Text search over s/p/o.")
    as_of = serializers.DateTimeField(required=False, help_text="Facts valid at this time (ISO 8601).")
    include_invalidated = serializers.BooleanField(required=False, default=False)
    order = serializers.ChoiceField(
        choices=["created", "last_seen"],
        required=False,
        default="created",
        help_text="`created`: newest first by first sighting; `last_seen`: most recently stated or extracted first.",
    )


class FactGraphQuerySerializer(serializers.Serializer):
    entity = serializers.CharField(max_length=MAX_FIELD_CHARS)
    depth = serializers.IntegerField(required=False, default=1, min_value=1, max_value=3)
    as_of = serializers.DateTimeField(required=False)
    session = serializers.UUIDField(required=False)


class GraphNodeSerializer(serializers.Serializer):
    id = serializers.CharField()
    label = serializers.CharField()  # type: ignore[assignment]  # a DRF declared field, not Field.label


class GraphEdgeSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    source = serializers.CharField()  # type: ignore[assignment]  # a DRF declared field, not Field.source
    target = serializers.CharField()
    predicate = serializers.CharField()


class FactGraphSerializer(serializers.Serializer):
    nodes = GraphNodeSerializer(many=True)
    edges = GraphEdgeSerializer(many=True)
    truncated = serializers.BooleanField()


class ExtractFactsInputSerializer(serializers.Serializer):
    from_seq = StrictIntegerField(required=False, min_value=1, max_value=INT_MAX)
    to_seq = StrictIntegerField(required=False, min_value=1, max_value=INT_MAX)
    text = StrictCharField(required=False, trim_whitespace=False)
    role = StrictCharField(required=False, max_length=MAX_ROLE_CHARS, default="user")

    def validate_text(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("must not be blank")
        if len(value) > settings.FACTS_MAX_INPUT_CHARS:
            raise serializers.ValidationError(f"at most {settings.FACTS_MAX_INPUT_CHARS} characters")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "text" in attrs and ("from_seq" in attrs or "to_seq" in attrs):
            raise serializers.ValidationError({"text": ["give either a text or a message range, not both"]})
        if "from_seq" in attrs and "to_seq" in attrs and attrs["to_seq"] < attrs["from_seq"]:
            raise serializers.ValidationError({"to_seq": ["must not be before from_seq"]})
        return attrs


class FactExtractionRunSerializer(WorkerOutputSerializer):
    worker_output_fields = ("raw_output", "error")
    session = serializers.UUIDField(source="session_id", read_only=True, allow_null=True)

    class Meta:
        model = FactExtractionRun
        fields = [
            "id",
            "session",
            "status",
            "trigger",
            "from_seq",
            "to_seq",
            "input_text",
            "raw_output",
            "error",
            "attempts",
            "backend",
            "model",
            "facts_added",
            "facts_seen",
            "facts_invalidated",
            "queued_at",
            "started_at",
            "finished_at",
            "duration_ms",
            "created_at",
        ]
        read_only_fields = fields


class FactExtractionListQuerySerializer(serializers.Serializer):
    session = serializers.UUIDField(required=False)
    status = serializers.ChoiceField(choices=FactExtractionRun.Status.choices, required=False)


class AcceptInputSerializer(serializers.Serializer):
    output = StrictCharField(
        allow_blank=True, trim_whitespace=False, help_text="The corrected raw output, parsed like an LLM answer."
    )
