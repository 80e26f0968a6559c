"""Output shapes and query validation of the compaction endpoints."""

from __future__ import annotations

from rest_framework import serializers

from memory_app.compaction.models import CompactionRun
from memory_app.jobs.serializers import WorkerOutputSerializer


class CompactionRunSerializer(WorkerOutputSerializer):
    worker_output_fields = ("error",)
    session_id = serializers.UUIDField(read_only=True)
    summary = serializers.JSONField(read_only=True)
    stages_run = serializers.JSONField(read_only=True)
    stages = serializers.ListField(
        child=serializers.DictField(),
        read_only=True,
        help_text="Every processor of the session's chain: {processor, ran, reason, estimated_savings}.",
    )

    class Meta:
        model = CompactionRun
        fields = [
            "id",
            "session_id",
            "status",
            "trigger",
            "attempts",
            "covered_from_seq",
            "covered_to_seq",
            "pre_tokens",
            "post_tokens",
            "pre_bytes",
            "post_bytes",
            "pre_messages",
            "post_messages",
            "stages_run",
            "stages",
            "hold_until_tokens",
            "duration_ms",
            "backend",
            "model",
            "prompt_tokens",
            "completion_tokens",
            "error",
            "summary",
            "created_at",
            "started_at",
            "finished_at",
            "reverted_at",
        ]
        read_only_fields = fields


class CompactQuerySerializer(serializers.Serializer):
    reason = serializers.ChoiceField(choices=["manual", "payload_error"], default="manual", required=False)
