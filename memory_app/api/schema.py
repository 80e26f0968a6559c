"""OpenAPI description of what every operation shares: the bearer-key authentication (loaded by
MemoryAppConfig.ready) and the error answers (the schema class named in REST_FRAMEWORK).

Every API error has one JSON shape (memsite/api_errors.py, memsite/middleware.py), and which
error statuses an operation can give follows from its shape: every call can lack a valid key,
writes can be refused to read keys, conflict with the current state, be too large or of an
unsupported media type; anything taking input can be invalid; anything naming an object in its
path can miss it. Declaring them here, once, keeps views free of repeated boilerplate and
makes routes added later honest too; views add what only they can answer (502/503 for LLM
calls, 404 for an id in the query).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiResponse, inline_serializer
from rest_framework import serializers

from memory_app.tenancy.throttles import LLMEndpointThrottle
from memsite.path_segments import DOT_SEGMENT

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")
# One non-empty URL segment that is not "." or "..", also not percent-encoded (memsite.path_segments).
PATH_SEGMENT = rf"^(?!{DOT_SEGMENT}$)[^/]+$"
NARROWED = {"format", "pattern", "enum"}


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "memory_app.tenancy.auth.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer", "description": "A team API key: `Bearer msk_...`."}


class ErrorSerializer(serializers.Serializer):
    """The one error shape (memsite/api_errors.py)."""

    error = serializers.CharField(help_text="A stable code: `validation_error`, `not_found`, `conflict` ...")
    detail = serializers.CharField(help_text="A sentence for people.")
    fields = serializers.DictField(  # type: ignore[assignment]  # a DRF declared field, not Serializer.fields
        child=serializers.ListField(child=serializers.CharField()),
        help_text='Problems by path of the offending field, e.g. `{"messages[1].role": ["..."]}`.',
    )


def _is_object_id(schema: dict[str, Any]) -> bool:
    return schema.get("format") == "uuid"


def error_statuses(
    *, method: str, operation: dict[str, Any], body_properties: dict[str, Any], causes_llm_work: bool = False
) -> dict[str, str]:
    """{status: description} of the errors an operation of this shape can answer."""
    parameters = operation.get("parameters", [])
    has_body = "requestBody" in operation
    names_an_object = (
        any(parameter["in"] == "path" for parameter in parameters)
        or any(parameter["in"] == "query" and _is_object_id(parameter.get("schema", {})) for parameter in parameters)
        or any(_is_object_id(schema) for schema in body_properties.values())
    )
    statuses = {"401": "No valid API key (missing, unknown or revoked)."}
    if has_body or parameters:
        statuses["400"] = "Invalid input: `fields` names each offending field."
    if method in WRITE_METHODS:
        statuses["403"] = "The key may not do this (a read key writing, or an admin-only action)."
        statuses["409"] = "The request conflicts with the current state (a duplicate id, a stale run ...)."
    if any(parameter["in"] == "header" and parameter["name"] == "Idempotency-Key" for parameter in parameters):
        statuses["422"] = (
            "The Idempotency-Key (`idempotency_key_reused`) or a client-chosen message_id (`message_id_reused`) "
            "already names a different request or message."
        )
    if names_an_object:  # in its path, or by id in its query or body
        statuses["404"] = "No such object in the caller's team."
    if causes_llm_work:
        statuses["429"] = (
            "Over the key's MEMSITE_LLM_RATE_LIMIT (`throttled`) or the team's daily LLM token budget "
            "(`budget_exceeded`); Retry-After says when to try again."
        )
    if has_body:
        statuses["413"] = "The request body is over MEMSITE_MAX_BODY_BYTES."
        statuses["415"] = "The request body's Content-Type is not one this operation reads."
    return statuses


class MemsiteAutoSchema(AutoSchema):
    """drf-spectacular's AutoSchema plus the error answers every operation can give."""

    def get_operation(self, *args: Any, **kwargs: Any) -> dict[str, Any] | None:
        operation = super().get_operation(*args, **kwargs)
        if operation is None:
            return None
        for parameter in operation.get("parameters", []):
            schema = parameter.get("schema", {})
            if parameter["in"] == "path" and schema.get("type") == "string" and not schema.keys() & NARROWED:
                # Django's `str` converter: one segment ("", "a/b" or "." would reach another route)
                schema["pattern"] = PATH_SEGMENT
        responses: dict[str, Any] = operation["responses"]
        statuses = error_statuses(
            method=self.method,
            operation=operation,
            body_properties=self._body_properties(operation),
            causes_llm_work=LLMEndpointThrottle in getattr(self.view, "throttle_classes", ()),
        )
        for status, description in statuses.items():
            responses.setdefault(status, {"description": description})
        for status, response in responses.items():
            # errors declared by a view with only a description get the shared body too
            if int(status) >= 400 and "content" not in response:
                error = OpenApiResponse(ErrorSerializer, description=response["description"])
                responses[status] = self._get_response_for_code(error, status, media_types=["application/json"])
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def _body_properties(self, operation: dict[str, Any]) -> dict[str, Any]:
        """The top-level properties of the request body, whichever media type and component holds them."""
        properties: dict[str, Any] = {}
        for media in operation.get("requestBody", {}).get("content", {}).values():
            schema = media.get("schema", {})
            if "$ref" in schema:
                name = schema["$ref"].rsplit("/", 1)[-1]
                try:
                    schema = self.registry[(name, ResolvedComponent.SCHEMA)].schema
                except KeyError:
                    continue
            properties.update(schema.get("properties", {}))
        return properties


def page_schema(name: str, item: serializers.Serializer) -> serializers.Serializer:
    return inline_serializer(
        name,
        {
            "count": serializers.IntegerField(),
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": item,
        },
    )
