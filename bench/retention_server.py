"""Bench-only server pieces of bench/retention_bench.py: a metering LLM backend, a primary-key floor
endpoint and the URLconf that mounts it after every product route.

`MeteredBackend` is selected by `LLM_BACKEND=bench.retention_server.MeteredBackend` (the product's
dotted-path backend setting, as Django selects a mail backend). It passes every request to the
backend named by `RETENTION_INNER_LLM_BACKEND` (the offline extractive one or the OpenAI-compatible
one) and keeps, per call, the tokens the backend reported and the tokens the request and answer
count with the product's tokenizer: the offline backend reports 0, and "counted" is what the same
compaction would have sent to and received from a model.

`PrimaryKeyFloorView` serves the rows the bench registered in `FLOOR_ROWS` for a session, read by
primary key, in the context endpoint's output shape: what serving exactly the rows of a context
costs through the same middleware and API-key authentication, with no context logic.
"""

from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from typing import ClassVar

from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from memory_app.conversations import counting, tokens
from memory_app.conversations.models import Message
from memory_app.conversations.selectors import CONTEXT_FIELDS
from memory_app.llm import get_backend
from memory_app.llm.base import ChatRequest, LLMResult
from memory_client.vocabulary.messages import to_openai_message
from memsite.urls import urlpatterns as product_urlpatterns


@dataclass(frozen=True)
class MeteredCall:
    purpose: str
    reported_prompt: int
    reported_completion: int
    counted_prompt: int
    counted_completion: int
    seconds: float


class MeteredBackend:
    calls: ClassVar[list[MeteredCall]] = []  # every call in this process, in order (the bench reads it)

    def __init__(self) -> None:
        self.inner = get_backend(os.environ["RETENTION_INNER_LLM_BACKEND"])
        self.name = self.inner.name
        self.model = self.inner.model
        self.supports_json_object = self.inner.supports_json_object
        self.billable = getattr(self.inner, "billable", True)

    def complete(self, request: ChatRequest) -> LLMResult:
        started = time.perf_counter()
        result = self.inner.complete(request)
        elapsed = time.perf_counter() - started
        self.calls.append(
            MeteredCall(
                purpose=request.purpose,
                reported_prompt=result.prompt_tokens,
                reported_completion=result.completion_tokens,
                counted_prompt=tokens.count_request([counting.message_tokens(m) for m in request.messages]),
                counted_completion=tokens.count_text(result.text),
                seconds=elapsed,
            )
        )
        return result


# session id -> the primary keys of the rows its context serves, oldest first (set by the bench).
FLOOR_ROWS: dict[str, list[uuid.UUID]] = {}


class PrimaryKeyFloorView(APIView):
    """GET the registered rows of a session by primary key, as the context endpoint shapes them."""

    def get(self, request: Request, session_id: uuid.UUID) -> Response:
        ids = FLOOR_ROWS[str(session_id)]
        rows = Message.objects.filter(pk__in=ids).order_by("seq").values(*CONTEXT_FIELDS)
        return Response({"messages": [to_openai_message(row) for row in rows]})


urlpatterns = [
    *product_urlpatterns,
    path("bench/retention/pk/<uuid:session_id>/", PrimaryKeyFloorView.as_view(), name="bench-retention-pk-floor"),
]
