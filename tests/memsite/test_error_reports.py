"""Django's development error page (DEBUG=True) lists the settings, the request's environment
and each frame's variables: service URLs with their passwords must be masked there too."""

from __future__ import annotations

import os
import sys
import time

import dj_database_url
import pytest
from django.test import RequestFactory
from django.views.debug import get_default_exception_reporter_filter, technical_500_response

from memsite.error_reports import CredentialMaskingFilter, mask_url_credentials

SECRET = "s3cret-9c41e7"
DATABASE_URL = f"postgres://memsite:{SECRET}@db.internal:5432/memsite"
REDIS_URL = f"redis://:{SECRET}@cache.internal:6379/0"
BROKER_URL = f"amqp://worker:{SECRET}@mq.internal:5672//"


@pytest.fixture
def service_urls(settings, monkeypatch) -> dict[str, str]:
    """The service URLs in the settings and in the environment, as a deployment sets them."""
    urls = {"DATABASE_URL": DATABASE_URL, "REDIS_URL": REDIS_URL, "CELERY_BROKER_URL": BROKER_URL}
    for name, url in urls.items():
        setattr(settings, name, url)
        monkeypatch.setenv(name, url)
    monkeypatch.setenv("REPORTING_DSN", BROKER_URL)  # under no telling name
    settings.CELERY_RESULT_BACKEND = REDIS_URL
    settings.SESSION_REPLICA = {"default": {"HOST": "db.internal", "DSN": DATABASE_URL}}  # under no telling name
    return urls


def error_page() -> str:
    """The technical 500 page of an error raised with URLs in local variables, for a request
    whose environment holds os.environ, as runserver passes it."""
    request = RequestFactory().get("/api/v1/sessions/", **os.environ)
    connection_url = DATABASE_URL  # noqa: F841 (shown in the frame's variables)
    options = {"broker": {"url": BROKER_URL}}  # noqa: F841
    try:
        raise ConnectionError("could not connect")
    except ConnectionError:
        response = technical_500_response(request, *sys.exc_info())
    return response.content.decode()


def test_the_default_filter_is_the_credential_masking_one():
    assert isinstance(get_default_exception_reporter_filter(), CredentialMaskingFilter)


def test_the_error_page_shows_no_service_password(service_urls):
    page = error_page()
    assert "could not connect" in page and "REPORTING_DSN" in page and "connection_url" in page  # the full page
    assert "amqp://********************@mq.internal" in page  # a URL is masked, not dropped
    assert SECRET not in page


def test_derived_settings_are_masked_whole_or_where_they_hold_a_password(service_urls):
    masking = CredentialMaskingFilter()
    settings_shown = masking.get_safe_settings()
    for name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "DATABASES"):
        assert settings_shown[name] == masking.cleansed_substitute, name
    assert SECRET not in repr(settings_shown)
    assert masking.cleanse_setting("CACHES", {"default": {"LOCATION": REDIS_URL}}) == {
        "default": {"LOCATION": masking.cleansed_substitute}
    }
    assert SECRET not in repr(masking.cleanse_setting("DATABASES", {"default": dj_database_url.parse(DATABASE_URL)}))
    assert settings_shown["ROOT_URLCONF"] == "memsite.urls"  # names merely containing "URL" stay readable


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (DATABASE_URL, "postgres://********************@db.internal:5432/memsite"),
        (REDIS_URL, "redis://********************@cache.internal:6379/0"),
        (f"retrying {BROKER_URL} in 2s", "retrying amqp://********************@mq.internal:5672// in 2s"),
        ("https://token-only@example.com/x", "https://********************@example.com/x"),
        ("https://example.com/a/b?c=d", "https://example.com/a/b?c=d"),
        ("user@example.com", "user@example.com"),
    ],
)
def test_credentials_inside_url_values_are_masked(text: str, shown: str):
    assert mask_url_credentials(text) == shown


def test_masking_a_huge_printed_value_takes_linear_time():
    started = time.perf_counter()
    mask_url_credentials("a." * 200_000 + DATABASE_URL)
    assert time.perf_counter() - started < 1.0
