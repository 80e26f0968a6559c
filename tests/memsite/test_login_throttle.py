"""Failed logins are throttled on both login pages (the dashboard's and the admin's): per
username from one address, and per address; over either limit the page answers 429 with
Retry-After, whatever the password, and a cache that cannot be reached lets logins through."""

from __future__ import annotations

import logging
import time
import uuid
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "a long and right password"
ATTACKER_IP = "203.0.113.7"
OTHER_IP = "198.51.100.20"
LOGIN_PAGES = {"/accounts/login/": "registration/login.html", "/admin/login/": "admin/login.html"}


@pytest.fixture(autouse=True)
def throttle_settings(settings) -> None:
    """Small limits and a cache of this test's own."""
    settings.LOGIN_MAX_FAILURES = 3
    settings.LOGIN_MAX_FAILURES_PER_IP = 5
    settings.LOGIN_LOCKOUT_SECONDS = 900
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": uuid.uuid4().hex}
    }


@pytest.fixture(autouse=True)
def alice(db, throttle_settings) -> None:
    get_user_model().objects.create_user("alice", password=PASSWORD, is_staff=True)  # staff: the admin lets her in


@pytest.fixture(params=list(LOGIN_PAGES), ids=["dashboard", "admin"])
def login_page(request: pytest.FixtureRequest) -> str:
    return request.param


def attempt(page: str, password: str, username: str = "alice", ip: str = ATTACKER_IP, client: Client | None = None):
    return (client or Client()).post(page, {"username": username, "password": password}, REMOTE_ADDR=ip)


def logged_in(response) -> bool:
    return response.status_code == 302 and "_auth_user_id" in response.wsgi_request.session


def test_the_right_password_is_refused_once_a_username_has_failed_too_often(login_page: str):
    for _ in range(3):
        assert attempt(login_page, "wrong").status_code == 200
    response = attempt(login_page, PASSWORD)
    assert response.status_code == 429 and not logged_in(response)
    assert 0 < int(response["Retry-After"]) <= 900
    assert response.templates[0].name == LOGIN_PAGES[login_page]  # the same login page
    assert "Too many failed logins" in response.content.decode()
    assert 'name="password"' in response.content.decode()  # with its form


def test_a_refused_login_never_checks_the_password(login_page: str):
    for _ in range(3):
        attempt(login_page, "wrong")
    with mock.patch.object(ModelBackend, "authenticate") as check_password:
        assert attempt(login_page, PASSWORD).status_code == 429
        assert attempt(login_page, "another guess").status_code == 429
    check_password.assert_not_called()


def test_the_same_username_still_logs_in_from_another_address(login_page: str):
    for _ in range(3):
        attempt(login_page, "wrong")
    assert logged_in(attempt(login_page, PASSWORD, ip=OTHER_IP))


def test_an_address_that_tries_many_usernames_is_refused_for_all_of_them(login_page: str):
    for i in range(5):
        assert attempt(login_page, "wrong", username=f"guess-{i}").status_code == 200
    assert attempt(login_page, PASSWORD).status_code == 429
    assert logged_in(attempt(login_page, PASSWORD, ip=OTHER_IP))


def test_the_two_pages_share_the_count(login_page: str):
    other_page = next(page for page in LOGIN_PAGES if page != login_page)
    attempt(login_page, "wrong")
    attempt(other_page, "wrong")
    attempt(login_page, "wrong")
    assert attempt(other_page, PASSWORD).status_code == 429


def test_a_successful_login_forgets_the_usernames_failures(login_page: str):
    for _ in range(2):
        attempt(login_page, "wrong")
    assert logged_in(attempt(login_page, PASSWORD))
    for _ in range(2):
        attempt(login_page, "wrong")
    assert logged_in(attempt(login_page, PASSWORD))  # 2 failures since the last login, not 4


def test_showing_the_form_is_never_refused(login_page: str):
    for _ in range(3):
        attempt(login_page, "wrong")
    assert Client().get(login_page, REMOTE_ADDR=ATTACKER_IP).status_code == 200


def test_the_lockout_ends(settings):
    settings.LOGIN_LOCKOUT_SECONDS = 1
    for _ in range(3):
        attempt("/accounts/login/", "wrong")
    refused = attempt("/accounts/login/", PASSWORD)
    assert refused.status_code == 429 and refused["Retry-After"] == "1"
    time.sleep(1.1)
    assert logged_in(attempt("/accounts/login/", PASSWORD))


@pytest.mark.parametrize("backend", ["filebased.FileBasedCache", "locmem.LocMemCache"])
def test_failures_count_until_the_lockout_time_passes_without_one(backend: str, settings, tmp_path, monkeypatch):
    settings.CACHES = {"default": {"BACKEND": f"django.core.cache.backends.{backend}", "LOCATION": str(tmp_path)}}
    start = time.time()
    for minutes in (0, 10, 20):  # each failure within 15 minutes of the one before
        monkeypatch.setattr(time, "time", lambda minutes=minutes: start + minutes * 60)
        attempt("/accounts/login/", "wrong")
    assert attempt("/accounts/login/", PASSWORD).status_code == 429
    monkeypatch.setattr(time, "time", lambda: start + (20 + 15) * 60 + 1)  # the lock ends, and so do the counts
    assert logged_in(attempt("/accounts/login/", PASSWORD))


def test_an_unreachable_cache_lets_logins_through_with_a_warning(login_page: str, settings, caplog):
    # Port 1 on the loopback: nothing listens, so every cache call fails at once.
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"}
    }
    with caplog.at_level(logging.WARNING, logger="memsite.login_throttle"):
        for _ in range(4):
            assert attempt(login_page, "wrong").status_code == 200
        assert logged_in(attempt(login_page, PASSWORD))
    assert any("cache" in record.getMessage() for record in caplog.records)
