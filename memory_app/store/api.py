"""Store API: one batch of LangGraph operations a request, run on the server."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from memory_app.api.base import TeamScopedView
from memory_app.conversations import selectors as conversations
from memory_app.store import serializers as ss
from memory_app.store import services
from memory_app.tenancy.models import ApiKey
from memory_app.tenancy.permissions import HasAnyTeamKey


class StoreBatchView(TeamScopedView):
    permission_classes = [HasAnyTeamKey]  # a batch that only reads is open to read keys

    @extend_schema(
        operation_id="store_batch",
        request=ss.StoreBatchInputSerializer,
        responses=ss.StoreBatchOutputSerializer,
        description="Run a batch of LangGraph store operations (get, put, search, list_namespaces) in order on "
        "the items of one session: namespaces and keys exactly as given, value filters, paging and namespace "
        "listings done in the database. A put is a fact superseding the key's live value (history is kept); "
        "a batch with a put needs a write key and is all or nothing.",
    )
    def post(self, request: Request) -> Response:
        serializer = ss.StoreBatchInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        session = conversations.session_get(team=self.team, session_id=data["session"])
        if self.api_key.role == ApiKey.Role.READ and any(op["op"] == "put" for op in data["ops"]):
            raise PermissionDenied("A write key is required to put or delete store items.")
        results = services.store_batch(
            session=session, role=data["role"], ops=data["ops"], curated=self.api_key.role == ApiKey.Role.ADMIN
        )
        return Response({"results": results})
