"""A NUL character in any URL segment is refused before any query, on every route.

PostgreSQL refuses NUL in text with an error, so an agent name, a round id or an entry id
holding one reached the database as a 500 there (SQLite simply found nothing). The route
walker puts one into every URL kwarg of every route, so a route added later is covered too.
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.url_routes import SAMPLE_KWARGS, all_routes

pytestmark = pytest.mark.django_db

WITH_NUL = {name: f"{value}%00x" for name, value in SAMPLE_KWARGS.items()}
ROUTES_WITH_KWARGS = [route for route in all_routes(**WITH_NUL) if "%00" in route.path]


def test_the_walker_reaches_the_routes_whose_segments_are_free_text():
    patterns = {route.pattern for route in ROUTES_WITH_KWARGS}
    assert "api/v1/sessions/<uuid:session_id>/agents/<str:agent>/memory/" in patterns
    assert "api/v1/sessions/<uuid:session_id>/rounds/<str:round_id>/" in patterns
    assert len(ROUTES_WITH_KWARGS) > 50


@pytest.fixture
def superuser(client: Client) -> Client:
    client.force_login(get_user_model().objects.create_user("root", is_staff=True, is_superuser=True))
    return client


@pytest.mark.parametrize("route", ROUTES_WITH_KWARGS, ids=lambda route: route.name)
def test_a_nul_in_a_url_segment_is_a_400_before_any_query(route, tenant, superuser, django_assert_num_queries):
    client = tenant.client if route.is_api else superuser
    for method in ("get", "post"):
        with django_assert_num_queries(0):
            response = getattr(client, method)(route.path)
        assert response.status_code == 400, (method, route.path, response.status_code)
        if route.is_api:
            assert response.json()["error"] == "validation_error"
