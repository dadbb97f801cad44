"""Exact counts from Anthropic's count endpoint (the fake one, through the real SDK)."""

from __future__ import annotations

import io
import json
import time
import uuid
from types import SimpleNamespace

import anthropic
import pytest
from django.core.cache import caches
from django.core.management import call_command
from django.test import override_settings

from compaction.messages import normalize_message
from compaction.model_catalog import CLAUDE_CALIBRATION
from ctxweb.cache import LruLocMemCache
from sessions_app import tasks
from sessions_app.models import AgentSession, ModelProfile
from sessions_app.selectors import count_cache, model_context, usage
from sessions_app.services import counting, ingest
from tests.drip_server import dripping
from tests.fakes.anthropic_server import FakeAnthropic


@pytest.fixture
def fake(settings):
    with FakeAnthropic() as server:
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.ANTHROPIC_MAX_RETRIES = 0
        yield server


def _long_session(session_of, **kwargs):
    session = session_of(model="claude-sonnet-4-5", system_prompt="Be brief.", **kwargs)
    text = f"nonce {uuid.uuid4()} " + "Summarize the build log and fix the failing test. " * 60
    with override_settings(ANTHROPIC_API_KEY=""):  # the tests below ask for the count themselves
        ingest.message_append(session=session, messages=[normalize_message({"role": "user", "content": text})])
    session.refresh_from_db()
    return session


def _request_of(session: AgentSession) -> dict:
    body = model_context.session_context(session)
    body.pop("status")
    return body


@pytest.mark.django_db
def test_exact_count_is_stored_marked_and_calibrates_the_model(fake, session_of):
    session = _long_session(session_of)
    expected = fake.count_tokens_for(_request_of(session))
    assert counting.session_count_exact(session_id=session.pk) == "counted"
    session.refresh_from_db()
    status = usage.session_status(session)
    assert status["token_source"] == "exact"
    assert status["used"] == expected
    # The stored level and usage follow the exact figure (lists and the dashboard read them).
    assert (session.level, session.usage_percent) == (status["level"], status["usage_percent"])
    profile = ModelProfile.objects.get(name="claude-sonnet-4-5")
    raw = session.system_tokens + session.message_tokens + 3
    assert profile.calibration_samples == 1
    # the shipped factor weighs as CALIBRATION_PRIOR_WEIGHT observations, the new one as one
    prior, w = CLAUDE_CALIBRATION, counting.CALIBRATION_PRIOR_WEIGHT
    assert profile.calibration_factor == pytest.approx((prior * w + expected / raw) / (w + 1))
    # The request went through the SDK with the session's own model, system prompt and messages.
    sent = fake.requests_for("count_tokens")[-1]["body"]
    assert sent["model"] == "claude-sonnet-4-5" and sent["system"] == "Be brief."


@pytest.mark.django_db
def test_a_new_message_makes_the_count_an_estimate_again(fake, session_of):
    session = _long_session(session_of)
    counting.session_count_exact(session_id=session.pk)
    with override_settings(ANTHROPIC_API_KEY=""):  # no new count queued: the old one no longer holds
        ingest.message_append(session=session, messages=[normalize_message({"role": "assistant", "content": "ok"})])
    session.refresh_from_db()
    assert usage.session_status(session)["token_source"] == "estimate"


@pytest.mark.django_db
@pytest.mark.parametrize("status_code", [400, 401])
def test_permanent_api_errors_fall_back_to_the_estimate_with_a_warning(fake, session_of, status_code):
    session = _long_session(session_of)
    fake.queue_error(status_code, endpoint="count_tokens")
    assert tasks.count_exact_tokens.apply(args=(session.pk,)).get() == "failed"
    session.refresh_from_db()
    status = usage.session_status(session)
    assert status["token_source"] == "estimate"
    assert any("Exact count unavailable" in w for w in status["warnings"])
    assert len(fake.requests_for("count_tokens")) == 1  # not retried


@pytest.mark.django_db
def test_transient_errors_are_retried_by_the_task(fake, session_of, monkeypatch):
    session = _long_session(session_of)
    fake.queue_error(529, endpoint="count_tokens", times=2)
    monkeypatch.setattr(tasks, "_backoff", lambda retries: 0)
    tasks.count_exact_tokens.apply(args=(session.pk,))
    session.refresh_from_db()
    assert len(fake.requests_for("count_tokens")) == 3
    status = usage.session_status(session)
    assert status["token_source"] == "exact" and status["warnings"] == []


@pytest.mark.django_db
def test_results_are_cached_by_content(fake, session_of):
    session = _long_session(session_of)
    counting.session_count_exact(session_id=session.pk)
    AgentSession.objects.filter(pk=session.pk).update(exact_tokens=None)
    counting.session_count_exact(session_id=session.pk)
    assert len(fake.requests_for("count_tokens")) == 1
    session.refresh_from_db()
    assert session.exact_tokens is not None


@pytest.mark.django_db
def test_count_endpoint_is_exact_with_a_key_and_falls_back_without(fake, team, api_as):
    body = {"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": f"hi {uuid.uuid4()}"}]}
    exact = api_as(team.carol).post("/api/v1/count_tokens/", body).json()
    assert exact == {"input_tokens": fake.count_tokens_for(body), "source": "exact", "cached": False}
    fake.queue_error(500, endpoint="count_tokens")
    body["messages"][0]["content"] += " again"
    fallback = api_as(team.carol).post("/api/v1/count_tokens/", body).json()
    assert fallback["source"] == "estimate" and fallback["input_tokens"] > 0


@pytest.mark.django_db
def test_an_upstream_dripping_its_count_holds_the_endpoint_no_longer_than_the_timeout(settings, team, api_as):
    """The count happens in the web request: ANTHROPIC_TIMEOUT bounds it in all, retries included,
    however slowly the upstream drips its answer (a byte every 0.2 s, here for 6 s)."""
    slow = b'{"input_tokens": 7}' + b" " * 100
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(slow)
    body = {"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": f"hi {uuid.uuid4()}"}]}
    with dripping(head, slow) as where:
        settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL = "test-key", f"http://{where}"
        settings.ANTHROPIC_TIMEOUT, settings.ANTHROPIC_MAX_RETRIES = 1.0, 2
        started = time.monotonic()
        answer = api_as(team.carol).post("/api/v1/count_tokens/", body).json()
        took = time.monotonic() - started
    assert answer["source"] == "estimate" and answer["input_tokens"] > 0
    assert 0.9 <= took < 2.5, took  # the first request loads the URLs and the SDK


# ----------------------------------------------------------------------------- the exact-count cache


def _body(text: str = "hi") -> dict:
    return {"model": "claude-haiku-4-5", "messages": [{"role": "user", "content": f"{text} {uuid.uuid4()}"}]}


@pytest.mark.django_db
def test_a_cached_count_builds_no_client_and_says_it_was_cached(fake, team, api_as, monkeypatch):
    body = _body()
    first = api_as(team.carol).post("/api/v1/count_tokens/", body).json()
    assert first == {"input_tokens": fake.count_tokens_for(body), "source": "exact", "cached": False}
    monkeypatch.setattr(anthropic, "Anthropic", lambda *a, **k: pytest.fail("a cache hit built an SDK client"))
    again = api_as(team.carol).post("/api/v1/count_tokens/", body).json()
    assert again == {**first, "cached": True}
    assert len(fake.requests_for("count_tokens")) == 1


@pytest.mark.django_db
def test_status_says_cached_when_the_sessions_exact_count_came_from_the_cache(fake, session_of, monkeypatch):
    session = _long_session(session_of)
    counting.session_count_exact(session_id=session.pk)
    session.refresh_from_db()
    first = usage.session_status(session)
    assert (first["token_source"], first["cached"]) == ("exact", False)
    monkeypatch.setattr(anthropic, "Anthropic", lambda *a, **k: pytest.fail("a cache hit built an SDK client"))
    assert counting.session_count_exact(session_id=session.pk) == "counted"
    session.refresh_from_db()
    again = usage.session_status(session)
    assert (again["token_source"], again["cached"], again["used"]) == ("exact", True, first["used"])
    with override_settings(ANTHROPIC_API_KEY=""):
        ingest.message_append(session=session, messages=[normalize_message({"role": "assistant", "content": "ok"})])
    session.refresh_from_db()
    newer = usage.session_status(session)
    assert (newer["token_source"], newer["cached"]) == ("estimate", False)  # an estimate is never "cached"


@pytest.mark.django_db
def test_stats_count_hits_misses_and_entries(fake):
    before = count_cache.exact_count_cache_stats()
    body = _body("stats")
    assert counting.count_request_tokens(body).cached is False
    assert counting.count_request_tokens(body).cached is True
    assert counting.count_request_tokens(body).cached is True
    after = count_cache.exact_count_cache_stats()
    assert (after.hits - before.hits, after.misses - before.misses) == (2, 1)
    assert after.size >= 1 and after.ttl_seconds == 3600


@pytest.mark.django_db
def test_a_malformed_message_is_refused_before_anthropic_is_asked(fake, team, api_as):
    body = _body()
    body["messages"].append({"role": "narrator", "content": "x"})
    answer = api_as(team.carol).post("/api/v1/count_tokens/", body)
    assert answer.status_code == 400 and fake.requests_for("count_tokens") == []


@pytest.mark.django_db
def test_ctx_count_stats_prints_the_figures(fake, monkeypatch):
    counting.count_request_tokens(_body("cli"))
    out = io.StringIO()
    call_command("ctx", "count", "--stats", "--json", stdout=out)
    stats = json.loads(out.getvalue())
    assert set(stats) == {"hits", "misses", "hit_rate", "size", "max_entries", "ttl_seconds", "backend"}
    assert stats["misses"] >= 1 and stats["size"] >= 1
    monkeypatch.setattr("sys.stdin", io.StringIO("not read"))
    out = io.StringIO()
    call_command("ctx", "count", "--stats", stdout=out)
    assert out.getvalue().startswith("Exact-count cache (") and f"{stats['misses']:,} misses" in out.getvalue()


def test_a_request_sent_again_has_the_same_key_and_any_other_another():
    text = json.dumps(_body())
    first, again = json.loads(text), json.loads(text)
    assert count_cache.request_key(first) == count_cache.request_key(again)
    again["messages"][0]["content"] += "."
    assert count_cache.request_key(first) != count_cache.request_key(again)
    keys = {count_cache.request_key({"n": n}) for n in (1, 1.0, True, "1")}
    assert len(keys) == 4  # equal in Python, not the same request


def test_the_exact_count_cache_is_bounded():
    cache = caches[count_cache.ALIAS]
    key = f"bounded-{uuid.uuid4()}"
    cache.set(key, 1)  # the alias's own TIMEOUT: CTX_EXACT_COUNT_CACHE_SECONDS
    if isinstance(cache, LruLocMemCache):  # the embedded default
        assert cache.max_entries == 1000
    else:  # Redis: every entry expires
        client = cache._cache.get_client(None)
        assert 0 < client.ttl(cache.make_key(key)) <= 3600
    cache.delete(key)


def test_the_local_memory_cache_drops_the_least_recently_used_entry_only():
    cache = LruLocMemCache(f"lru-{uuid.uuid4()}", {"OPTIONS": {"MAX_ENTRIES": 1000}})
    for i in range(1000):
        cache.set(f"k{i}", i)
    assert cache.get("k0") == 0  # read: now the most recently used
    cache.set("k0", 0)  # overwriting a key adds nothing and drops nothing
    assert cache.entry_count() == 1000 and cache.get("k1") == 1
    cache.set("new", -1)
    assert cache.entry_count() == 1000
    assert cache.get("k2") is None  # the least recently used went, and only it
    assert cache.get("k0") == 0 and cache.get("k1") == 1 and cache.get("k3") == 3 and cache.get("new") == -1


@pytest.mark.django_db
def test_the_ops_page_shows_the_cache_to_staff_only(fake, client, team):
    counting.count_request_tokens(_body("ops"))
    stats = count_cache.exact_count_cache_stats()
    client.force_login(team.alice.user)  # a project admin, not staff
    assert client.get("/ops/").status_code == 404
    team.alice.user.is_staff = True
    team.alice.user.save(update_fields=["is_staff"])
    page = client.get("/ops/").content.decode()
    assert f'data-stat="misses">{stats.misses}<' in page and f'data-stat="hits">{stats.hits}<' in page
    assert 'href="/ops/"' in page  # staff find it in the header


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_counts_after_an_append(celery_worker, settings, team, api_as):
    fake = celery_worker["fake"]
    settings.ANTHROPIC_API_KEY = "test-key"
    settings.ANTHROPIC_BASE_URL = fake.base_url
    settings.CTX_EXACT_COUNT_DEBOUNCE_SECONDS = 0
    bob = api_as(team.bob)
    created = bob.post("/api/v1/sessions/", {"project": team.project.pk, "model": "claude-sonnet-4-5"}).json()
    text = f"nonce {uuid.uuid4()} " + "Please read the config and explain it. " * 80
    posted = bob.post(f"/api/v1/sessions/{created['id']}/messages/", {"role": "user", "content": text})
    assert posted.json()["status"]["token_source"] == "estimate"
    deadline = time.monotonic() + 30
    status = None
    while time.monotonic() < deadline:
        status = bob.get(f"/api/v1/sessions/{created['id']}/status/").json()
        if status["token_source"] == "exact":
            break
        time.sleep(0.2)
    assert status["token_source"] == "exact", "the worker did not store an exact count within 30 s"
    session = AgentSession.objects.get(pk=created["id"])
    assert status["used"] == fake.count_tokens_for(_request_of(session))
    worker_pid = celery_worker["process"].pid
    assert worker_pid and celery_worker["process"].poll() is None


@pytest.mark.django_db
def test_a_process_asks_the_cache_for_a_models_lesson_once_an_interval(settings, monkeypatch):
    """Each exchange's reply could teach the calibration: one lesson per model per interval, and a
    process asks the shared cache about it once an interval, not on every exchange."""
    from sessions_app.services import exact_usage

    settings.CTX_PROXY_CALIBRATION_SECONDS = 60
    caches["default"].clear()
    now = [1_000.0]
    monkeypatch.setattr(exact_usage, "time", SimpleNamespace(monotonic=lambda: now[0]))
    asked, lessons = [], []
    add = exact_usage.cache.add
    monkeypatch.setattr(exact_usage.cache, "add", lambda *a, **k: asked.append(a[0]) or add(*a, **k))
    monkeypatch.setattr(counting, "model_calibration_update", lambda **k: lessons.append(k["model"]))
    for seconds in (0, 1, 30, 59):
        now[0] = 1_000.0 + seconds
        exact_usage.calibration_observe(model="m-a", exact=5_000, raw_estimate=4_500)
    exact_usage.calibration_observe(model="m-b", exact=5_000, raw_estimate=4_500)
    assert lessons == ["m-a", "m-b"] and len(asked) == 2
    caches["default"].clear()  # the interval over for the cache too
    now[0] = 1_000.0 + 61
    exact_usage.calibration_observe(model="m-a", exact=5_000, raw_estimate=4_500)
    assert lessons == ["m-a", "m-b", "m-a"] and len(asked) == 3
