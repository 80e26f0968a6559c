"""The compaction endpoints of a session: compact now, the ledger, revert."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.base import query_params
from memory_app.compaction import selectors as compaction_selectors
from memory_app.compaction import serializers as compaction_serializers
from memory_app.compaction import services as compaction
from memory_app.compaction.models import CompactionRun
from memory_app.conversations.api import SessionScopedView
from memory_app.tenancy.throttles import LLMEndpointThrottle


class CompactView(SessionScopedView):
    throttle_classes = [LLMEndpointThrottle]

    @extend_schema(
        request=None,
        parameters=[compaction_serializers.CompactQuerySerializer],
        responses={202: compaction_serializers.CompactionRunSerializer},
        description="Queue a compaction now (`reason=payload_error` runs the managed memory's payload-too-large "
        "recovery). If one is already pending or running, that run is returned. 409 with the reason when nothing "
        "can be compacted (not a managed session, summarization off, or every message after the latest summary "
        "in the protected tail); a request lifts the hold a revert put on automatic compaction.",
    )
    def post(self, request: Request, session_id: str) -> Response:
        reason = query_params(compaction_serializers.CompactQuerySerializer, request)["reason"]
        trigger = CompactionRun.Trigger.PAYLOAD_ERROR if reason == "payload_error" else CompactionRun.Trigger.MANUAL
        run, _ = compaction.compaction_request(session=self.get_session(), trigger=trigger)
        return Response(compaction_serializers.CompactionRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class CompactionListView(SessionScopedView):
    @extend_schema(
        operation_id="sessions_compactions_list", responses=compaction_serializers.CompactionRunSerializer(many=True)
    )
    def get(self, request: Request, session_id: str) -> Response:
        runs = compaction_selectors.compaction_runs(session=self.get_session())[:200]
        return Response(compaction_serializers.CompactionRunSerializer(runs, many=True).data)


class CompactionRevertView(SessionScopedView):
    @extend_schema(request=None, responses=compaction_serializers.CompactionRunSerializer)
    def post(self, request: Request, session_id: str, run_id: str) -> Response:
        run = compaction_selectors.compaction_run_get(session=self.get_session(), run_id=run_id)
        return Response(compaction_serializers.CompactionRunSerializer(compaction.compaction_revert(run=run)).data)
