"""API permissions: a valid team key is required; read keys may only read."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.conf import settings
from rest_framework.exceptions import NotAuthenticated, PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from memory_app.tenancy.models import ApiKey

if TYPE_CHECKING:  # importing views here would be circular: DRF loads this from settings
    from rest_framework.views import APIView


class HasTeamKey(BasePermission):
    message = "A valid API key with write access is required for this request."

    def has_permission(self, request: Request, view: APIView) -> bool:
        api_key = request.auth
        if not isinstance(api_key, ApiKey):
            return False
        return request.method in SAFE_METHODS or api_key.role != ApiKey.Role.READ


def request_api_key(request: Request) -> ApiKey:
    """The ApiKey that authenticated the request (memory_app.auth). HasTeamKey, the API's default
    permission, already refused any request without one; a view that allows one gets a 401 here."""
    api_key = request.auth
    if not isinstance(api_key, ApiKey):
        raise NotAuthenticated()
    return api_key


def require_admin(request: Request, what: str) -> None:
    """Team settings, curation and purges are for admin keys; agents hold read or write keys.

    Views call this after their lookup, so another team's ids still answer 404 (not 403).
    tests/security/test_key_roles.py lists which route and method needs which role.
    """
    if request_api_key(request).role != ApiKey.Role.ADMIN:
        raise PermissionDenied(f"An admin key is required to {what}.")


class ApiDocsAccess(BasePermission):
    """The OpenAPI schema and Swagger UI: public when MEMSITE_API_DOCS_PUBLIC is on (the default
    outside production), else for a team key of any role or a logged-in dashboard user."""

    message = "The API documentation needs an API key or a dashboard login here."

    def has_permission(self, request: Request, view: APIView) -> bool:
        if settings.API_DOCS_PUBLIC:
            return True
        if isinstance(request.auth, ApiKey):
            return True
        user = request.user
        return bool(user is not None and user.is_authenticated)


class HasAnyTeamKey(BasePermission):
    """For a POST that only reads (a search with a body): read keys may make it too."""

    message = "A valid API key is required for this request."

    def has_permission(self, request: Request, view: APIView) -> bool:
        return isinstance(request.auth, ApiKey)
