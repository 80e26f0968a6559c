"""Usage API (token economics): what the team's memory work spent in LLM tokens and what its contexts saved."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.base import TeamScopedView, query_params
from memory_app.conversations import selectors
from memory_app.conversations.serializers import RecalledMemorySerializer
from memory_app.usage import selectors as usage_selectors


@extend_schema_field({"type": "string", "example": "2026-11-01", "description": "ISO date or datetime"})
class MomentField(serializers.Field):
    """An ISO date (`2026-11-01`: the whole UTC day) or an ISO datetime."""

    default_error_messages = {"invalid": "Use an ISO date (YYYY-MM-DD) or datetime (YYYY-MM-DDThh:mm[:ss][+hh:mm])."}

    def __init__(self, *, end_of_day: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.end_of_day = end_of_day

    def to_internal_value(self, data: Any) -> datetime:
        text = str(data).strip()
        try:
            moment = parse_datetime(text)
            day = None if moment else parse_date(text)
        except ValueError:
            self.fail("invalid")
        if moment is not None:
            return moment if timezone.is_aware(moment) else moment.replace(tzinfo=UTC)
        if day is None:
            self.fail("invalid")
        return _day_bound(day, end=self.end_of_day)

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


def _day_bound(day: date, *, end: bool) -> datetime:
    # `to=2026-11-01` includes that whole day: the bound is the next midnight (exclusive).
    return datetime.combine(day + timedelta(days=1) if end else day, time.min, tzinfo=UTC)


class UsageQuerySerializer(serializers.Serializer):
    group_by = serializers.ChoiceField(choices=usage_selectors.GROUPS, default="session")
    from_ = MomentField(required=False, help_text="Start (inclusive); default 30 days ago.")
    to = MomentField(required=False, end_of_day=True, help_text="End (exclusive; a date includes that day).")
    session = serializers.UUIDField(required=False, help_text="Only this session's figures.")
    agent = serializers.CharField(required=False, max_length=200, help_text="Only this agent's figures.")

    def get_fields(self) -> dict[str, serializers.Field]:
        # `from` is a Python keyword: the field is declared as from_ and read as ?from=.
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")
        return fields

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        since, until = attrs.get("from"), attrs.get("to")
        if since and until and since >= until:
            raise serializers.ValidationError({"to": ["must be after from"]})
        return attrs


class FiguresSerializer(serializers.Serializer):
    llm_calls = serializers.IntegerField()
    llm_errors = serializers.IntegerField(help_text="Calls that did not return an answer (incl. budget refusals).")
    budget_refusals = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    spent_tokens = serializers.IntegerField(help_text="prompt + completion tokens of memsite's LLM calls.")
    contexts_served = serializers.IntegerField()
    raw_tokens = serializers.IntegerField(help_text="Tokens of the raw histories the served contexts stand for.")
    served_tokens = serializers.IntegerField(help_text="Tokens the served contexts held.")
    saved_tokens = serializers.IntegerField(help_text="raw - served, per context (never negative).")
    window_kept_out_tokens = serializers.IntegerField(
        help_text="Tokens of stored messages the window (the default window, `last`, `max_tokens`) kept out."
    )
    compaction_saved_tokens = serializers.IntegerField(
        help_text="Tokens compaction kept out (summaries, tool truncation, packing). saved = window_kept_out + "
        "compaction_saved - what the context adds (recalled memories, reply priming); contexts served before "
        "the two were told apart count in saved only."
    )
    net_tokens = serializers.IntegerField(help_text="saved - spent.")


class UsageGroupSerializer(serializers.Serializer):
    key = serializers.CharField(allow_null=True, help_text="Session id, agent name or purpose.")
    label = serializers.CharField()  # type: ignore[assignment]  # a DRF declared field, not Field.label
    figures = FiguresSerializer()


class BudgetSerializer(serializers.Serializer):
    daily_budget = serializers.IntegerField(help_text="Tokens per UTC day; 0 = unlimited.")
    spent_today = serializers.IntegerField()
    remaining = serializers.IntegerField(allow_null=True)
    resets_in_seconds = serializers.IntegerField()


class UsageOutputSerializer(serializers.Serializer):
    group_by = serializers.CharField()
    from_ = serializers.DateTimeField()
    to = serializers.DateTimeField()
    totals = FiguresSerializer()
    groups = UsageGroupSerializer(many=True)
    budget = BudgetSerializer()

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields["from"] = fields.pop("from_")
        return fields


class UsageView(TeamScopedView):
    @extend_schema(
        operation_id="usage_retrieve",
        parameters=[UsageQuerySerializer],
        responses=UsageOutputSerializer,
        description="Tokens memsite's LLM work (summaries, fact extraction, experience selection) spent and "
        "tokens the served contexts saved (raw history minus what was sent), in total and per session, agent "
        "or purpose, over [from, to) (default the last 30 days), with the team's daily budget.",
    )
    def get(self, request: Request) -> Response:
        query = query_params(UsageQuerySerializer, request)
        default_since, default_until = usage_selectors.default_range()
        session_id = query.get("session")
        scope = usage_selectors.UsageFilter(
            team=self.team,
            since=query.get("from") or default_since,
            until=query.get("to") or default_until,
            session=selectors.session_get(team=self.team, session_id=session_id) if session_id else None,
            agent=query.get("agent"),
        )
        groups = usage_selectors.usage_groups(scope=scope, group_by=query["group_by"])
        budget = usage_selectors.budget_status(team=self.team)
        return Response(
            {
                "group_by": query["group_by"],
                "from": scope.since.isoformat(),
                "to": scope.until.isoformat(),
                "totals": usage_selectors.usage_totals(scope=scope).as_dict(),
                "groups": [{"key": g.key, "label": g.label, "figures": g.figures.as_dict()} for g in groups],
                "budget": {**budget.__dict__, "remaining": budget.remaining},
            }
        )


# --- GET /contexts/{context_id}/: a served context replayed ------------------------------------


class ContextParamsSerializer(serializers.Serializer):
    last = serializers.IntegerField(allow_null=True)
    max_tokens = serializers.IntegerField(allow_null=True)
    recall = serializers.CharField(allow_null=True)
    recall_k = serializers.IntegerField(allow_null=True)
    recall_kinds = serializers.ListField(child=serializers.CharField(), allow_null=True)


class ServedPartSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["system", "recall", "instruction", "summary", "message", "borrowed"])
    seq = serializers.IntegerField(allow_null=True, help_text="The stored message it is (None: not a stored one).")
    token_count = serializers.IntegerField()
    truncated = serializers.BooleanField(help_text="A tool output shortened by tool truncation.")


class ReplaySummarySerializer(serializers.Serializer):
    run_id = serializers.UUIDField()
    covered_to_seq = serializers.IntegerField(allow_null=True)
    messages = serializers.ListField(child=serializers.DictField())


class ReplayedMemorySerializer(RecalledMemorySerializer):
    """A recalled memory as the context served it, with its text then."""

    text = serializers.CharField(help_text="The memory's text when it was recalled (its first 4000 characters).")


class ReplayRecallSerializer(serializers.Serializer):
    query = serializers.CharField()
    automatic = serializers.BooleanField()
    token_count = serializers.IntegerField()
    memories = ReplayedMemorySerializer(many=True)


class BreakdownSerializer(serializers.Serializer):
    system = serializers.IntegerField()
    summary = serializers.IntegerField()
    recall = serializers.IntegerField()
    window = serializers.IntegerField()
    priming = serializers.IntegerField()


class ContextReplaySerializer(serializers.Serializer):
    context_id = serializers.UUIDField()
    session_id = serializers.UUIDField()
    served_at = serializers.DateTimeField()
    agent = serializers.CharField()
    params = ContextParamsSerializer(help_text="What the context read asked for (null: the default).")
    messages = serializers.ListField(
        child=serializers.DictField(), help_text="Exactly the `messages` of the answer it replays."
    )
    parts = ServedPartSerializer(many=True, help_text="Where each message comes from, in the same order.")
    token_count = serializers.IntegerField()
    raw_tokens = serializers.IntegerField(help_text="The system prompt and every stored message when it was served.")
    breakdown = BreakdownSerializer(allow_null=True, help_text="token_count by part.")
    summary = ReplaySummarySerializer(allow_null=True, help_text="The compaction summary it started from.")
    recall = ReplayRecallSerializer(allow_null=True, help_text="The memories recall put in it, with their text.")
    previous_context_id = serializers.UUIDField(allow_null=True)
    next_context_id = serializers.UUIDField(allow_null=True)


class ContextReplayView(TeamScopedView):
    @extend_schema(
        operation_id="contexts_retrieve",
        responses=ContextReplaySerializer,
        description="One served context (the `context_id` of a GET .../context/ answer) exactly as it was served: "
        "its messages as sent, even after later appends, edits, compactions or reverts; the read's parameters; "
        "the recalled memories with their text and scores; the summary it started from; its tokens by part. "
        "Kept MEMSITE_CONTEXT_RECORD_DAYS days. Asked for within a few seconds of the read, it may answer 404 "
        "`not_recorded_yet` with Retry-After: its batch is not written yet.",
    )
    def get(self, request: Request, context_id: uuid.UUID) -> Response:
        record = usage_selectors.context_record_get(team=self.team, context_id=context_id)
        neighbours = usage_selectors.context_record_neighbours(record)
        return Response(usage_selectors.context_replay(record, neighbours))
