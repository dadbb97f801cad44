"""Rate limits per API key and per user: 429 with Retry-After and the usual error body."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from sessions_app.services import keys

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_counters():
    cache.clear()
    yield
    cache.clear()


def test_a_key_over_its_rate_gets_429_with_retry_after(settings, api_as, team):
    settings.CTX_RATE_LIMIT_KEY = "3/minute"
    bob = api_as(team.bob)
    assert [bob.get("/api/v1/projects/").status_code for _ in range(3)] == [200, 200, 200]
    refused = bob.get("/api/v1/projects/")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0
    assert refused.json()["code"] == "throttled" and "available in" in refused.json()["detail"]
    # Another key of the same user has a budget of its own.
    _, other = keys.apikey_create(user=team.bob.user, name="second agent")
    assert api_as(type(team.bob)(user=team.bob.user, key=other)).get("/api/v1/projects/").status_code == 200
    # And another user is not affected at all.
    assert api_as(team.carol).get("/api/v1/projects/").status_code == 200


def test_a_user_over_the_rate_is_limited_across_all_their_keys(settings, api_as, team):
    settings.CTX_RATE_LIMIT_USER = "4/minute"
    _, second = keys.apikey_create(user=team.bob.user, name="second agent")
    first, other = api_as(team.bob), api_as(type(team.bob)(user=team.bob.user, key=second))
    statuses = [client.get("/api/v1/projects/").status_code for client in (first, other, first, other)]
    assert statuses == [200] * 4
    assert other.get("/api/v1/projects/").status_code == 429
    assert api_as(team.carol).get("/api/v1/projects/").status_code == 200


def test_no_limit_configured_means_no_limit(settings, api_as, team):
    settings.CTX_RATE_LIMIT_KEY = ""
    settings.CTX_RATE_LIMIT_USER = ""
    bob = api_as(team.bob)
    assert {bob.get("/api/v1/projects/").status_code for _ in range(30)} == {200}
