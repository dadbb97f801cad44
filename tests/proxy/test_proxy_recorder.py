"""Recording proxied exchanges after their answers are out: the recorder's lanes (order, back-pressure,
failures, exit), and the recording itself, which must give the same session whatever order the
exchanges of a conversation are recorded in (several web processes record them concurrently)."""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions_app.api.proxy import recorder as recorder_module
from sessions_app.api.proxy.recorder import Recorder
from sessions_app.models import Message
from sessions_app.selectors import usage
from sessions_app.services import proxy
from tests.hypothesis_budget import DATABASE


@pytest.fixture
def lanes(settings: Any) -> Any:
    settings.CTX_PROXY_RECORDERS = 3
    settings.CTX_PROXY_RECORD_QUEUE = 4
    recorder = Recorder()
    yield recorder
    recorder.stop()


def test_a_sessions_exchanges_are_recorded_in_the_order_they_ended(lanes):
    done: dict[int, list[int]] = {key: [] for key in range(7)}

    def job(key: int, n: int) -> None:
        time.sleep(0.001 * ((key * 7 + n) % 3))  # uneven work, so lanes interleave
        done[key].append(n)

    for n in range(20):
        for key in done:
            lanes.begin(key)
            lanes.submit(key, lambda key=key, n=n: job(key, n))
    assert lanes.idle(timeout=30)
    assert done == {key: list(range(20)) for key in done}


def test_a_full_lane_makes_the_request_wait_and_drops_nothing(lanes, settings):
    settings.CTX_PROXY_RECORD_QUEUE = 1
    recorder = Recorder()  # lanes of one place each
    release, ran = threading.Event(), []
    recorder.begin(0)
    recorder.submit(0, release.wait)  # holds its lane
    submitted = []

    def submit_more() -> None:
        for n in range(3):
            recorder.begin(0)
            recorder.submit(0, lambda n=n: ran.append(n))
            submitted.append(n)

    waiting = threading.Thread(target=submit_more)
    waiting.start()
    time.sleep(0.2)
    assert len(submitted) < 3  # the lane is full: the submitting thread waits
    release.set()
    waiting.join(10)
    assert recorder.idle(timeout=10) and ran == [0, 1, 2]
    recorder.stop()


def test_a_failing_job_is_logged_and_the_lane_goes_on(lanes, caplog):
    ran = []
    lanes.begin(1)
    lanes.submit(1, lambda: 1 / 0)
    lanes.begin(1)
    lanes.submit(1, lambda: ran.append("next"))
    assert lanes.idle(timeout=10)
    assert ran == ["next"]
    assert any(r.exc_info and r.exc_info[0] is ZeroDivisionError for r in caplog.records)


def test_stopping_records_what_is_queued_first(settings):
    settings.CTX_PROXY_RECORDERS = 1
    recorder = Recorder()
    ran = []
    for n in range(5):
        recorder.begin(0)
        recorder.submit(0, lambda n=n: (time.sleep(0.01), ran.append(n)))
    recorder.stop()
    assert ran == list(range(5))


def test_without_lanes_the_job_runs_in_the_requests_thread(settings):
    settings.CTX_PROXY_RECORDERS = 0
    recorder = Recorder()
    seen = []
    recorder.begin(5)
    recorder.submit(5, lambda: seen.append(threading.current_thread()))
    assert seen == [threading.current_thread()] and recorder.idle(timeout=0)


def _lane_connections(recorder: Recorder, jobs: int, between: float = 0.0) -> list[Any]:
    """The database connection each of ``jobs`` jobs ran on, one lane, the lane idle between them."""
    from django.db import connections

    seen: list[Any] = []

    def job() -> None:
        wrapper = connections["default"]  # the lane thread's own
        wrapper.ensure_connection()
        seen.append((wrapper, wrapper.connection))

    for _ in range(jobs):
        recorder.begin(0)
        recorder.submit(0, job)
        assert recorder.idle(timeout=10)
        time.sleep(between)
    return seen


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("keep", [60, None])
def test_a_lane_keeps_its_connection_between_jobs(lanes, settings, keep):
    settings.DATABASES = {"default": {**settings.DATABASES["default"], "CONN_MAX_AGE": keep}}
    seen = _lane_connections(lanes, 3)
    assert len({id(raw) for _, raw in seen}) == 1 and all(raw is seen[0][1] for _, raw in seen)


def _closable() -> None:
    from django.db import connection

    if connection.vendor == "sqlite" and connection.is_in_memory_db():  # type: ignore[attr-defined]
        pytest.skip("an in-memory SQLite database: Django never closes its connection")


@pytest.mark.django_db(transaction=True)
def test_without_persistent_connections_an_idle_lane_keeps_none(lanes, settings):
    _closable()
    settings.DATABASES = {"default": {**settings.DATABASES["default"], "CONN_MAX_AGE": 0}}
    seen = _lane_connections(lanes, 2, between=0.2)
    assert seen[0][1] is not seen[1][1]
    assert seen[-1][0].connection is None  # given back once the lane had nothing more


@pytest.mark.django_db(transaction=True)
def test_a_lane_idle_past_conn_max_age_gives_its_connection_back(lanes, settings):
    _closable()
    settings.DATABASES = {"default": {**settings.DATABASES["default"], "CONN_MAX_AGE": 0.3}}
    seen = _lane_connections(lanes, 1)
    assert seen[0][0].connection is not None  # kept while the lane may get more
    deadline = time.monotonic() + 10
    while seen[0][0].connection is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert seen[0][0].connection is None


# ----------------------------------------------------------------------------- recording order


def conversation(turns: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """An agent's exchanges: each request resends the history, each answer is a message with usage."""
    history: list[dict[str, Any]] = []
    exchanges = []
    for n in range(turns):
        history.append({"role": "user", "content": f"turn {n}: " + "look at this. " * (n + 1)})
        answer = {
            "id": f"msg_{n}",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": f"answer {n}"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 100 + 10 * n, "output_tokens": 5},
        }
        exchanges.append(({"model": "claude-sonnet-4-5", "messages": list(history)}, answer))
        history.append({"role": "assistant", "content": answer["content"]})
    return exchanges


@pytest.mark.django_db
@settings(DATABASE, suppress_health_check=list(HealthCheck))
@given(order=st.permutations(range(5)))
def test_any_order_of_recording_gives_the_conversation_once_in_its_order(team, order):
    exchanges = conversation(5)
    key = f"order-{'-'.join(map(str, order))}"
    session = proxy.proxy_session_for(user=team.bob.user, project=team.project, key=key, body=exchanges[0][0])
    for index in order:
        body, answer = exchanges[index]
        proxy.proxy_record_exchange(
            session_id=session.pk, after_seq=len(body["messages"]), pending=body, message=answer, complete=True, key=key
        )
    last_body, last_answer = exchanges[-1]
    whole = [*last_body["messages"], {"role": "assistant", "content": last_answer["content"]}]
    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    assert stored == [(m["role"], m["content"]) for m in whole]
    session.refresh_from_db()
    status = usage.session_status(session)
    # The exact count is the last answer's when its exchange was recorded last (else it was stored
    # with the next request's history, and the figures are estimates until the next answer).
    if order[-1] == len(exchanges) - 1:
        assert status["token_source"] == "exact"
        assert status["used"] == last_answer["usage"]["input_tokens"] + last_answer["usage"]["output_tokens"]


# ----------------------------------------------------------------------------- giving way to requests


@pytest.fixture
def allowance(monkeypatch: Any) -> float:
    """A lane's allowance to give way, long enough that waiting or not can't be mistaken."""
    monkeypatch.setattr(recorder_module, "_GIVE_WAY", 2.0)
    return 2.0


def _one_statement(recorder: Recorder, key: int = 0, *, atomic: bool = False) -> list[float]:
    """Submits a job running one statement (in a transaction with ``atomic``); when it was sent
    and when it ran."""
    from django.db import connections, transaction

    ran: list[float] = []

    def job() -> None:
        with transaction.atomic() if atomic else nullcontext():  # (SQLite's BEGIN is a statement)
            sent = time.monotonic()
            with connections["default"].cursor() as cursor:
                cursor.execute("SELECT 1")
        ran.extend([time.monotonic(), sent])

    recorder.begin(key)
    recorder.submit(key, job)
    return ran


@pytest.mark.django_db(transaction=True)
def test_a_lane_gives_way_to_a_request_on_its_way_to_its_first_byte(lanes, allowance):
    with lanes.forwarding():
        ran = _one_statement(lanes)
        time.sleep(0.2)
        assert not ran  # waiting for the request
        left = time.monotonic()
    assert lanes.idle(timeout=10)
    assert ran[0] >= left


@pytest.mark.django_db(transaction=True)
def test_a_lane_gives_way_for_its_allowance_only(lanes, allowance):
    with lanes.forwarding():
        started = time.monotonic()
        ran = _one_statement(lanes)
        assert lanes.idle(timeout=10)  # recorded while the request is still on its way
    assert allowance <= ran[0] - started < allowance + 5


@pytest.mark.django_db(transaction=True)
def test_a_lane_does_not_wait_inside_a_transaction(lanes, allowance):
    with lanes.forwarding():
        ran = _one_statement(lanes, atomic=True)
        assert lanes.idle(timeout=10)
    assert ran[0] - ran[1] < allowance / 2


@pytest.mark.django_db(transaction=True)
def test_a_request_waiting_for_the_lanes_lets_them_run(lanes, allowance):
    with lanes.forwarding():
        started = time.monotonic()
        ran = _one_statement(lanes, key=4)
        assert lanes.caught_up(4, timeout=10)
        assert ran and ran[0] - started < allowance / 2


@pytest.mark.django_db(transaction=True)
def test_a_request_sent_upstream_no_longer_holds_the_lanes(lanes, allowance):
    """Once sent, a request waits for the model, which holds nothing up: the lanes go on (after the
    moment an upstream answering at once would take)."""
    with lanes.forwarding() as sent_upstream:
        ran = _one_statement(lanes)
        time.sleep(0.2)
        assert not ran
        sent_upstream()
        sent = time.monotonic()
        assert lanes.idle(timeout=allowance / 2)
    assert ran[0] >= sent + recorder_module._AFTER_SENT * 0.9
