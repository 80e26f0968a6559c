"""What Django's error reports (the DEBUG=True error pages, error e-mails) show of secrets.

Django's own filter masks settings whose names sound secret (KEY, PASS, TOKEN...). The service
URLs carry their passwords under names that do not (DATABASE_URL, REDIS_URL, CELERY_BROKER_URL,
and what settings derive from them), and the development error page also lists the request's
environment, which under runserver is the whole of os.environ, and every frame's variables.
"""

from __future__ import annotations

import re
from collections.abc import ItemsView
from types import FrameType
from typing import Any

from django.http import HttpRequest
from django.template.defaultfilters import pprint
from django.views.debug import SafeExceptionReporterFilter

from memsite import masking

# Django's list, plus the names service URLs and their derived settings go by. URL(?!CONF)
# spares ROOT_URLCONF, which holds no secret and helps when reading a routing error.
_HIDDEN_NAMES = re.compile(
    r"API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|URL(?!CONF)|BROKER|DATABASE|LOCATION",
    re.IGNORECASE,
)
MASK = SafeExceptionReporterFilter.cleansed_substitute


def mask_url_credentials(text: str) -> str:
    """`text` with the user and password of every URL in it replaced by Django's own mask, the
    one the rest of the error page shows (memsite.masking finds them)."""
    return masking.mask_url_credentials(text, mask=MASK)


class _Shown:
    """A frame variable as the error page will show it: its printed form, masked. The page
    prints each value with `pprint`, which uses this object's repr."""

    def __init__(self, value: Any) -> None:
        self._text = mask_url_credentials(pprint(value))

    def __repr__(self) -> str:
        return self._text


class CredentialMaskingFilter(SafeExceptionReporterFilter):
    """Masks service URLs and their derived settings by name, and the credentials of any URL
    found in a setting, the request's environment, a cookie or a frame's variables."""

    hidden_settings = _HIDDEN_NAMES

    def cleanse_setting(self, key: Any, value: Any) -> Any:
        # Also reached for each item of a dict, list or tuple, and for request.META and cookies.
        cleansed = super().cleanse_setting(key, value)
        return mask_url_credentials(cleansed) if isinstance(cleansed, str) else cleansed

    def get_traceback_frame_variables(self, request: HttpRequest | None, tb_frame: FrameType) -> ItemsView[str, Any]:
        # Masked on the printed form, so a URL inside any object (a dict, a connection's
        # repr) is caught; Django's own masking of decorated functions happens first.
        variables = super().get_traceback_frame_variables(request, tb_frame)
        return {name: _Shown(value) for name, value in variables}.items()
