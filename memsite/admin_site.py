"""The Django admin site of the project: Django's own, with failed logins throttled like the
dashboard's (memsite/login_throttle.py). `memsite.admin_apps.MemsiteAdminConfig` in INSTALLED_APPS
makes it `admin.site` everywhere, so nothing patches the admin at import time."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest, HttpResponse

from memsite.login_throttle import throttle_failed_logins


class MemsiteAdminSite(admin.AdminSite):
    def login(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        return throttle_failed_logins(super().login)(request, extra_context)
