"""Serializers of the event feed: its list, its stream's query and the stream's resume point."""

from __future__ import annotations

from rest_framework import serializers

from memory_app.events.models import MemoryEvent
from memsite.parsers import INT_MAX


class EventStreamQuerySerializer(serializers.Serializer):
    session = serializers.UUIDField(required=False, help_text="Only this session's events (default: the team's).")
    after = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=INT_MAX,
        help_text="Resume after this event id (the `Last-Event-ID` header wins). Default: only new events.",
    )


class LastEventIdSerializer(serializers.Serializer):
    last_event_id = serializers.IntegerField(min_value=0, max_value=2**63 - 1)


class MemoryEventSerializer(serializers.ModelSerializer):
    # null for team-wide events (a team-wide fact invalidated)
    session_id = serializers.UUIDField(read_only=True, allow_null=True)
    data = serializers.JSONField(  # type: ignore[assignment]  # a DRF declared field, not Serializer.data
        read_only=True
    )

    class Meta:
        model = MemoryEvent
        fields = ["id", "session_id", "kind", "data", "created_at"]
        read_only_fields = fields


class EventQuerySerializer(serializers.Serializer):
    session = serializers.UUIDField(required=False)
    after = serializers.IntegerField(
        required=False, min_value=0, max_value=INT_MAX, help_text="Cursor: events with id > after."
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=500, default=100)
