"""Facts API: validate -> call a service or selector -> serialize."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.base import TeamScopedView, query_params
from memory_app.api.schema import page_schema
from memory_app.conversations import selectors
from memory_app.conversations.models import Session
from memory_app.facts import extraction as fact_extraction
from memory_app.facts import selectors as fact_selectors
from memory_app.facts import serializers as fs
from memory_app.facts import services as facts
from memory_app.facts.models import Fact, FactExtractionRun
from memory_app.tenancy.models import ApiKey
from memory_app.tenancy.permissions import require_admin
from memory_app.tenancy.throttles import LLMEndpointThrottle


class FactPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


class FactsView(TeamScopedView):
    def session_or_none(self, session_id: Any) -> Session | None:
        return selectors.session_get(team=self.team, session_id=session_id) if session_id else None

    def get_fact(self) -> Fact:
        return fact_selectors.fact_get(team=self.team, fact_id=self.kwargs["fact_id"])

    def get_run(self) -> FactExtractionRun:
        return fact_selectors.fact_extraction_get(team=self.team, run_id=self.kwargs["extraction_id"])


class FactListCreateView(FactsView):
    @extend_schema(
        operation_id="facts_list",
        parameters=[fs.FactListQuerySerializer],
        responses=page_schema("FactPage", fs.FactOutputSerializer(many=True)),
        description="Live facts newest first; `as_of` gives the facts valid at that time, "
        "`include_invalidated=true` adds the invalidated ones.",
    )
    def get(self, request: Request) -> Response:
        query = query_params(fs.FactListQuerySerializer, request)
        query["session"] = self.session_or_none(query.get("session"))
        found = fact_selectors.fact_list(team=self.team, **query)
        paginator = FactPagination()
        page = paginator.paginate_queryset(found, request, view=self)
        return paginator.get_paginated_response(fs.FactOutputSerializer(page, many=True).data)

    @extend_schema(
        request=fs.FactInputSerializer,
        responses={201: fs.FactOutputSerializer, 200: fs.FactOutputSerializer},
        description="Add a fact (KGMemory's add_fact). When the same fact is already live in that scope "
        "(the session, or team-wide without one) it is returned with times_seen + 1 and status 200. A fact added, "
        "edited or restored with an admin key is `curated`: a later contradicting value of a single-valued "
        "predicate from any other key is stored already invalidated by it, for an admin to review.",
    )
    def post(self, request: Request) -> Response:
        serializer = fs.FactInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        data["session"] = self.session_or_none(data.get("session"))
        fact, created = facts.fact_add(team=self.team, **data, curated=self.api_key.role == ApiKey.Role.ADMIN)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(fs.FactOutputSerializer(fact).data, status=code)


class FactDetailView(FactsView):
    @extend_schema(responses=fs.FactOutputSerializer)
    def get(self, request: Request, fact_id: str) -> Response:
        return Response(fs.FactOutputSerializer(self.get_fact()).data)

    @extend_schema(
        request=fs.FactPatchSerializer,
        responses=fs.FactOutputSerializer,
        description='Edit a fact, or restore an invalidated one with `{"invalidated": false}` (admin key).',
    )
    def patch(self, request: Request, fact_id: str) -> Response:
        fact = self.get_fact()
        require_admin(request, "change facts")
        serializer = fs.FactPatchSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(fs.FactOutputSerializer(facts.fact_update(fact=fact, data=serializer.validated_data)).data)

    @extend_schema(responses={204: None}, description="Invalidate the fact (admin key); it is never deleted.")
    def delete(self, request: Request, fact_id: str) -> Response:
        fact = self.get_fact()
        require_admin(request, "invalidate facts")
        facts.fact_invalidate(fact=fact)
        return Response(status=status.HTTP_204_NO_CONTENT)


class FactGraphView(FactsView):
    @extend_schema(
        operation_id="facts_graph",
        parameters=[fs.FactGraphQuerySerializer],
        responses=fs.FactGraphSerializer,
        description="The entity's neighbourhood within `depth` hops: nodes are normalised terms (labelled "
        "as written), edges are facts from subject to object.",
    )
    def get(self, request: Request) -> Response:
        query = query_params(fs.FactGraphQuerySerializer, request)
        query["session"] = self.session_or_none(query.get("session"))
        graph = fact_selectors.fact_graph(team=self.team, **query)
        return Response({"nodes": graph.nodes, "edges": graph.edges, "truncated": graph.truncated})


class ExtractFactsView(FactsView):
    throttle_classes = [LLMEndpointThrottle]

    @extend_schema(
        request=fs.ExtractFactsInputSerializer,
        responses={202: fs.FactExtractionRunSerializer},
        description="Queue a fact extraction over messages from_seq..to_seq (inclusive; default the whole "
        "session) or over a given `text` spoken by `role`.",
    )
    def post(self, request: Request, session_id: str) -> Response:
        session = selectors.session_get(team=self.team, session_id=session_id)
        serializer = fs.ExtractFactsInputSerializer(data=request.data or {})
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        if "text" in data:
            run = fact_extraction.fact_extraction_request_text(session=session, text=data["text"], role=data["role"])
        else:
            run = fact_extraction.fact_extraction_request(
                session=session, from_seq=data.get("from_seq"), to_seq=data.get("to_seq")
            )
        return Response(fs.FactExtractionRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class FactExtractionListView(FactsView):
    @extend_schema(
        operation_id="fact_extractions_list",
        parameters=[fs.FactExtractionListQuerySerializer],
        responses=page_schema("FactExtractionPage", fs.FactExtractionRunSerializer(many=True)),
    )
    def get(self, request: Request) -> Response:
        query = query_params(fs.FactExtractionListQuerySerializer, request)
        query["session"] = self.session_or_none(query.get("session"))
        runs = fact_selectors.fact_extraction_list(team=self.team, **query)
        paginator = FactPagination()
        page = paginator.paginate_queryset(runs, request, view=self)
        return paginator.get_paginated_response(fs.FactExtractionRunSerializer(page, many=True).data)


class FactExtractionDetailView(FactsView):
    @extend_schema(responses=fs.FactExtractionRunSerializer)
    def get(self, request: Request, extraction_id: str) -> Response:
        return Response(fs.FactExtractionRunSerializer(self.get_run()).data)


class FactExtractionRetryView(FactsView):
    @extend_schema(
        request=None,
        responses={202: fs.FactExtractionRunSerializer},
        description="Run a quarantined or failed extraction again (admin key).",
    )
    def post(self, request: Request, extraction_id: str) -> Response:
        run = self.get_run()
        require_admin(request, "retry extractions")
        run = fact_extraction.fact_extraction_retry(run=run)
        return Response(fs.FactExtractionRunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class FactExtractionAcceptView(FactsView):
    @extend_schema(
        request=fs.AcceptInputSerializer,
        responses=fs.FactExtractionRunSerializer,
        description="Apply a corrected raw output to a quarantined or failed extraction (admin key); it is "
        "parsed like an LLM answer and refused (400) when it still does not parse.",
    )
    def post(self, request: Request, extraction_id: str) -> Response:
        run = self.get_run()
        require_admin(request, "accept extractions")
        serializer = fs.AcceptInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        run = fact_extraction.fact_extraction_accept(run=run, output=serializer.validated_data["output"])
        return Response(fs.FactExtractionRunSerializer(run).data)


class FactExtractionDiscardView(FactsView):
    @extend_schema(
        request=None,
        responses=fs.FactExtractionRunSerializer,
        description="Give up on a quarantined or failed extraction (admin key).",
    )
    def post(self, request: Request, extraction_id: str) -> Response:
        run = self.get_run()
        require_admin(request, "discard extractions")
        return Response(fs.FactExtractionRunSerializer(fact_extraction.fact_extraction_discard(run=run)).data)
