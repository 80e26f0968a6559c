"""A recording fake for unit tests (like Django's locmem mail backend)."""

from __future__ import annotations

from collections.abc import Callable

from memory_app.llm.base import ChatRequest, LLMResult

RECORDED: list[ChatRequest] = []
# Tests set this to script the answer; the default echoes the last message.
RESPONDER: list[Callable[[ChatRequest], str]] = []


class FakeBackend:
    name = "fake"
    model = "fake-model"
    supports_json_object = True
    billable = True

    def complete(self, request: ChatRequest) -> LLMResult:
        RECORDED.append(request)
        text = RESPONDER[-1](request) if RESPONDER else str(request.messages[-1].get("content", ""))
        return LLMResult(text=text, backend=self.name, model=self.model)
