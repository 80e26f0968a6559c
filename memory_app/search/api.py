"""POST /api/v1/search/: hybrid search over the team's memory."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.base import TeamScopedView
from memory_app.conversations import selectors as conversations
from memory_app.search import selectors
from memory_app.search import serializers as ss
from memory_app.tenancy.permissions import HasAnyTeamKey


class SearchView(TeamScopedView):
    permission_classes = [HasAnyTeamKey]  # a search only reads: read keys may search

    @extend_schema(
        operation_id="search",
        request=ss.SearchInputSerializer,
        responses=ss.SearchOutputSerializer,
        description="Hybrid search over the team's memory: messages, summaries, facts, agent record entries, "
        "experiences, shared memory and text attachments. Full-text and vector candidates are fused by "
        "reciprocal rank, then weighted by recency and kind; invalidated facts and superseded records come only "
        "with `include_invalidated` (or as they were live at `as_of`), after every live result. `explain=true` "
        "adds each result's ranks and factors.",
    )
    def post(self, request: Request) -> Response:
        serializer = ss.SearchInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        if data.get("session") is not None:
            data["session"] = conversations.session_get(team=self.team, session_id=data["session"]).pk
        result = selectors.search(
            filters=selectors.filters_from(data, team_id=self.team.pk), query=data["query"], limit=data["limit"]
        )
        return Response(
            {
                "query": result.query,
                "results": [ss.SearchHitSerializer.of(hit, explain=data["explain"]) for hit in result.hits],
                "engines": {
                    "lexical": result.lexical_engine,
                    "vector": result.vector_engine,
                    "model": result.model,
                    "vector_error": result.vector_error,
                },
                "pending": result.pending,
            }
        )
