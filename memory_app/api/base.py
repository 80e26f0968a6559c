"""What every API view shares: the caller's team from its key, and query-string validation."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.views import APIView

from memory_app.tenancy.models import ApiKey, Team
from memory_app.tenancy.permissions import request_api_key


class TeamScopedView(APIView):
    """Every query starts from the team of the key that made the request."""

    @property
    def api_key(self) -> ApiKey:
        return request_api_key(self.request)

    @property
    def team(self) -> Team:
        return self.api_key.team


def query_params(serializer_class: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    if not request.query_params:
        # Most agent calls send no query string; its validation is the same in every request.
        return dict(_validated_without_parameters(serializer_class))
    return _validated(serializer_class, request.query_params)


def _validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


@functools.cache
def _validated_without_parameters(serializer_class: type[serializers.Serializer]) -> Mapping[str, Any]:
    """What an empty query string validates to: the fields' defaults, fixed per process (no
    query serializer has a default computed per call; a mutable one would be shared, so the
    mapping is read-only and callers get a shallow copy)."""
    return MappingProxyType(_validated(serializer_class, {}))
