"""Experiences API serializers: request shapes and types only; the rules live in the services."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from experiences_app import selectors
from experiences_app.models import Experience, ExperienceRevision, SelectionLog
from experiences_app.selection import DEFAULT_SELECTION_TEMPLATE
from experiences_app.yaml_io import EXP_ID_MAX_LENGTH, MAX_TEXT_CHARS

MAX_QUERY_CHARS = 20_000
MAX_CONTEXT_CHARS = 200_000  # clipped to MEMSITE_EXPERIENCE_CONTEXT_MAX_CHARS by the service


def _text(**kwargs: Any) -> serializers.CharField:
    # Blank and untrimmed on purpose: yaml_io.validate_experience reports (and cleans) these.
    return serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=MAX_TEXT_CHARS * 2, **kwargs)


class ExperienceInputSerializer(serializers.Serializer):
    exp_id = serializers.CharField(max_length=EXP_ID_MAX_LENGTH)
    who = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False, default=list)
    when = _text()
    what = _text()
    note = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


class ExperiencePatchSerializer(serializers.Serializer):
    who = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    when = _text(required=False)
    what = _text(required=False)
    status = serializers.ChoiceField(choices=Experience.Status.choices, required=False)
    note = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


class ExperienceOutputSerializer(serializers.ModelSerializer):
    serving_revision = serializers.SerializerMethodField(
        help_text="The approved revision selection serves: the latest while approved, the previous approved "
        "one while an edit awaits review, null when nothing is served (a new draft, or disabled)."
    )

    def get_serving_revision(self, experience: Experience) -> int | None:
        return selectors.serving_revision_number(experience)

    class Meta:
        model = Experience
        fields = [
            "exp_id",
            "who",
            "when",
            "what",
            "status",
            "author",
            "reviewer",
            "reviewed_at",
            "revision",
            "serving_revision",
            "created_at",
            "updated_at",
        ]


class ExperienceListQuerySerializer(serializers.Serializer):
    role = serializers.CharField(required=False, max_length=200)
    status = serializers.ChoiceField(choices=Experience.Status.choices, required=False)
    q = serializers.CharField(required=False, max_length=200)


class NoteSerializer(serializers.Serializer):
    note = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


class RevisionSerializer(serializers.ModelSerializer):
    class Meta:
        model = ExperienceRevision
        fields = ["number", "exp_id", "who", "when", "what", "status", "changed_by", "note", "created_at"]


class DiffQuerySerializer(serializers.Serializer):
    a = serializers.IntegerField(min_value=1)
    b = serializers.IntegerField(min_value=1)


class DiffOutputSerializer(serializers.Serializer):
    a = serializers.IntegerField()
    b = serializers.IntegerField()
    diff = serializers.DictField(child=serializers.CharField(allow_blank=True))


class ImportInputSerializer(serializers.Serializer):
    files = serializers.ListField(child=serializers.FileField(), required=False, default=list)
    archive = serializers.FileField(required=False)
    dry_run = serializers.BooleanField(required=False, default=False)
    approve = serializers.BooleanField(required=False, default=False)


class ImportEntrySerializer(serializers.Serializer):
    file = serializers.CharField()
    exp_id = serializers.CharField()
    status = serializers.ChoiceField(
        choices=Experience.Status.choices, help_text="After the import (what it would be, in a dry run)."
    )


class ImportUpdateSerializer(ImportEntrySerializer):
    previous_status = serializers.ChoiceField(choices=Experience.Status.choices)
    left_selection = serializers.BooleanField(
        help_text="It was approved and is no longer a candidate for selection (an import no longer does "
        "this: see awaiting_review)."
    )
    awaiting_review = serializers.BooleanField(
        help_text="It was approved and the change made it a draft awaiting review: its approved revision "
        "stays a candidate for selection until the change is approved."
    )


class RejectedSerializer(serializers.Serializer):
    file = serializers.CharField()
    line = serializers.IntegerField(allow_null=True)
    error = serializers.CharField()


class ImportReportSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    created = ImportEntrySerializer(many=True)
    updated = ImportUpdateSerializer(many=True)
    unchanged = ImportEntrySerializer(many=True)
    rejected = RejectedSerializer(many=True)
    left_selection = ImportUpdateSerializer(
        many=True, help_text="The updated experiences that left selection (approved before, not after)."
    )
    awaiting_review = ImportUpdateSerializer(
        many=True, help_text="The approved experiences whose change awaits review; their approved text stays selected."
    )


class ExportQuerySerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Experience.Status.choices, required=False)


class SelectInputSerializer(serializers.Serializer):
    role = serializers.CharField(max_length=200)
    query = serializers.CharField(max_length=MAX_QUERY_CHARS, trim_whitespace=False)
    context = serializers.CharField(  # type: ignore[assignment]  # a DRF declared field, not Field.context
        required=False, allow_blank=True, trim_whitespace=False, max_length=MAX_CONTEXT_CHARS
    )
    session_id = serializers.UUIDField(required=False)
    round_id = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")
    post_id = serializers.CharField(required=False, allow_blank=True, max_length=200, default="")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "context" in attrs and "session_id" in attrs:
            raise serializers.ValidationError({"context": ["give either context or session_id, not both"]})
        return attrs


class CandidateSerializer(serializers.Serializer):
    exp_id = serializers.CharField()
    when = serializers.CharField()


class NotOfferedSerializer(serializers.Serializer):
    exp_id = serializers.CharField(allow_blank=True, help_text='empty on the last entry of a cut list ("and 12 more")')
    reason = serializers.CharField(help_text='"draft r1: never approved", "disabled", "for Planner, not Coder"')


class SelectedSerializer(serializers.Serializer):
    exp_id = serializers.CharField()
    what = serializers.CharField()


class SelectOutputSerializer(serializers.Serializer):
    role = serializers.CharField()
    query = serializers.CharField()
    context = serializers.CharField(  # type: ignore[assignment]  # a DRF declared field, not Field.context
        allow_blank=True
    )
    use_experience = serializers.BooleanField()
    skipped = serializers.CharField(allow_blank=True, help_text="Why no LLM was asked; empty when one was.")
    candidates = CandidateSerializer(many=True)
    not_offered = NotOfferedSerializer(
        many=True, help_text="The team's other experiences, not shown to the LLM, and why (at most 100 listed)."
    )
    selected = SelectedSerializer(many=True)
    prompt_text = serializers.CharField(allow_blank=True, help_text="The block to inject into the role's prompt.")
    messages = serializers.ListField(child=serializers.DictField())
    raw_response = serializers.CharField(allow_blank=True)
    backend = serializers.CharField(allow_blank=True)
    model = serializers.CharField(allow_blank=True)
    latency_ms = serializers.IntegerField()
    log_id = serializers.CharField(allow_null=True)


class ConfigInputSerializer(serializers.Serializer):
    use_experience = serializers.DictField(child=serializers.BooleanField(), required=False)
    selection_template = serializers.CharField(
        required=False, allow_blank=True, trim_whitespace=False, max_length=MAX_TEXT_CHARS
    )
    llm_alias = serializers.ChoiceField(choices=selectors.LLM_ALIASES, required=False)


class ConfigOutputSerializer(serializers.Serializer):
    use_experience = serializers.DictField(child=serializers.BooleanField())
    switches = serializers.SerializerMethodField(
        help_text="The switches named after a role's configuration section, and the role each governs "
        "(`code_generator` governs CodeInterpreter); any other `use_experience` key is a role name."
    )
    selection_template = serializers.CharField(allow_blank=True, help_text='"" = the default template')
    effective_template = serializers.SerializerMethodField()
    default_template = serializers.SerializerMethodField()
    llm_alias = serializers.CharField(allow_blank=True)
    updated_at = serializers.DateTimeField(allow_null=True)
    updated_by = serializers.CharField(allow_blank=True)

    def get_switches(self, config: Any) -> dict[str, str]:
        return dict(selectors.USE_EXPERIENCE_SWITCHES)

    def get_effective_template(self, config: Any) -> str:
        return selectors.config_template(config)

    def get_default_template(self, config: Any) -> str:
        return DEFAULT_SELECTION_TEMPLATE


class SelectionLogSerializer(serializers.ModelSerializer):
    session_id = serializers.UUIDField(allow_null=True)
    not_offered = NotOfferedSerializer(many=True, read_only=True)

    class Meta:
        model = SelectionLog
        fields = [
            "id",
            "role",
            "query",
            "context",
            "candidates",
            "not_offered",
            "messages",
            "raw_response",
            "selected",
            "backend",
            "model",
            "latency_ms",
            "prompt_tokens",
            "completion_tokens",
            "error",
            "session_id",
            "round_id",
            "post_id",
            "created_at",
        ]


class SelectionLogListQuerySerializer(serializers.Serializer):
    role = serializers.CharField(required=False, max_length=200)
    session = serializers.UUIDField(required=False)
