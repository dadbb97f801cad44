"""Clearing the exact-count cache: ``ctx count --clear`` and the ops page's button remove ctxweb's
exact counts and their hit and miss counters, nothing else; sessions keep their stored exact counts."""

from __future__ import annotations

import io
import json
import os
import socket
import uuid

import pytest
import redis
from django.core.cache import caches
from django.core.management import call_command
from django.test import override_settings

from compaction.messages import normalize_message
from sessions_app.selectors import count_cache, usage
from sessions_app.services import counting, ingest
from sessions_app.services.count_cache import exact_count_cache_clear
from tests.fakes.anthropic_server import FakeAnthropic


@pytest.fixture
def fake(settings):
    with FakeAnthropic() as server:
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.ANTHROPIC_MAX_RETRIES = 0
        yield server


def _body(tag: str) -> dict:
    return {"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": f"count me {tag} {uuid.uuid4()}"}]}


def _clear_cli(*args: str) -> str:
    out = io.StringIO()
    call_command("ctx", "count", "--clear", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_ctx_count_clear_removes_the_entries_and_resets_the_figures(fake):
    exact_count_cache_clear()
    bodies = [_body(str(n)) for n in range(3)]
    for body in bodies:
        counting.count_request_tokens(body)
    counting.count_request_tokens(bodies[0])  # a hit
    before = count_cache.exact_count_cache_stats()
    assert (before.size, before.hits, before.misses) == (3, 1, 3)
    data = json.loads(_clear_cli("--json"))
    assert data["removed"] == 3
    after = count_cache.exact_count_cache_stats()
    assert (after.size, after.hits, after.misses) == (0, 0, 0)
    asked = len(fake.requests_for("count_tokens"))
    assert counting.count_request_tokens(bodies[0]).cached is False  # counted by Anthropic again
    assert len(fake.requests_for("count_tokens")) == asked + 1
    assert _clear_cli().startswith("Cleared the exact-count cache: 1 entries removed")


def test_stats_and_clear_together_are_refused():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="not both"):
        call_command("ctx", "count", "--clear", "--stats", stdout=io.StringIO())


@pytest.mark.django_db
def test_a_sessions_exact_count_outlives_the_clear(fake, session_of):
    session = session_of(model="claude-sonnet-4-5")
    text = f"nonce {uuid.uuid4()} " + "Read the log and fix the test. " * 60
    with override_settings(ANTHROPIC_API_KEY=""):
        ingest.message_append(session=session, messages=[normalize_message({"role": "user", "content": text})])
    assert counting.session_count_exact(session_id=session.pk) == "counted"
    session.refresh_from_db()
    counted = usage.session_status(session)
    exact_count_cache_clear()
    session.refresh_from_db()
    assert usage.session_status(session)["token_source"] == "exact"
    assert usage.session_status(session)["used"] == counted["used"]


@pytest.mark.django_db
def test_the_ops_page_clears_for_staff_only(fake, client, team):
    counting.count_request_tokens(_body("ops"))
    assert count_cache.exact_count_cache_stats().size >= 1
    client.force_login(team.alice.user)  # a project admin, not staff
    assert client.post("/ops/exact-count-cache/clear/").status_code == 404
    assert count_cache.exact_count_cache_stats().size >= 1  # nothing cleared
    team.alice.user.is_staff = True
    team.alice.user.save(update_fields=["is_staff"])
    assert client.get("/ops/exact-count-cache/clear/").status_code == 405  # a change is a POST
    size = count_cache.exact_count_cache_stats().size
    page = client.post("/ops/exact-count-cache/clear/", follow=True)
    assert page.redirect_chain[-1][0] == "/ops/"
    body = page.content.decode()
    assert f"Cleared the exact-count cache: {size:,} entries removed" in body
    assert 'data-stat="size">0' in body and 'data-stat="hits">0<' in body


@pytest.mark.django_db
def test_the_ops_button_needs_the_csrf_token(team):
    from django.test import Client

    checked = Client(enforce_csrf_checks=True)
    team.alice.user.is_staff = True
    team.alice.user.save(update_fields=["is_staff"])
    checked.force_login(team.alice.user)
    assert checked.post("/ops/exact-count-cache/clear/").status_code == 403
    page = checked.get("/ops/").content.decode()
    assert 'action="/ops/exact-count-cache/clear/"' in page and "csrfmiddlewaretoken" in page


def _redis_url() -> str:
    return os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"


def _redis_or_skip() -> redis.Redis:
    client = redis.Redis.from_url(_redis_url())
    try:
        client.ping()
    except redis.exceptions.ConnectionError:
        pytest.skip("no Redis to clear in")
    return client


@pytest.mark.django_db
def test_with_redis_only_ctxwebs_exact_counts_go():
    client = _redis_or_skip()
    # A prefix of this test's own: a clear must not reach another test's (or process's) counts.
    prefix = f"ctx-exact-test-{uuid.uuid4().hex[:8]}"
    backend = {"BACKEND": "ctxweb.cache.ResilientRedisCache", "LOCATION": _redis_url()}
    celery_key, other_key = f"celery-task-meta-{uuid.uuid4()}", f"unacked-{uuid.uuid4()}"
    client.set(celery_key, "{}")  # the broker's and result backend's keys share the database
    client.lpush(other_key, "task")
    try:
        with override_settings(
            CACHES={
                "default": {**backend, "KEY_PREFIX": f"{prefix}-default"},
                "exact_counts": {**backend, "KEY_PREFIX": prefix},
            }
        ):
            exact = caches[count_cache.ALIAS]
            for n in range(5):
                exact.set(count_cache.request_key({"n": n}), n)
            caches["default"].set("kept", "yes")
            caches["default"].set(count_cache.STATS_KEYS["hits"], 7)
            assert count_cache.exact_count_cache_stats().backend == "redis"
            assert exact_count_cache_clear() == 5
            assert count_cache.exact_count_cache_stats().size == 0
            assert caches["default"].get(count_cache.STATS_KEYS["hits"]) is None
            assert caches["default"].get("kept") == "yes"
            caches["default"].delete("kept")
        assert client.get(celery_key) == b"{}" and client.llen(other_key) == 1
    finally:
        client.delete(celery_key, other_key)


@pytest.mark.django_db
def test_with_redis_down_the_clear_removes_nothing_and_fails_nothing():
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down = {"BACKEND": "ctxweb.cache.ResilientRedisCache", "LOCATION": f"redis://127.0.0.1:{port}/0"}
    with override_settings(CACHES={"default": down, "exact_counts": {**down, "KEY_PREFIX": "ctx-exact"}}):
        assert exact_count_cache_clear() == 0
