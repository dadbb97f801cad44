"""Compactions run by a real Celery worker on Redis, against Postgres and the fake Anthropic API."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from compaction.checkpoint import CHECKPOINT_FIELDS
from compaction.messages import normalize_message
from sessions_app import tasks
from sessions_app.errors import Conflict
from sessions_app.models import Compaction, Message
from sessions_app.selectors import usage
from sessions_app.services import compaction_records, compaction_runs, ingest
from sessions_app.tasks import run_compaction
from tests.conftest import ROOT, start_worker, stop_worker
from tests.sessions_app.compaction_helpers import agent_rounds, append, checkpoint_reply, rows_of

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def worker(celery_worker, settings):
    fake = celery_worker["fake"]
    fake.reset()
    fake.set_reply_function(checkpoint_reply)
    # this process queues with the same settings the worker runs with
    settings.ANTHROPIC_API_KEY = "test-key"
    settings.ANTHROPIC_BASE_URL = fake.base_url
    settings.CELERY_TASK_ALWAYS_EAGER = False
    yield celery_worker
    fake.set_delay(0, endpoint="messages")
    fake.set_reply_function(None)
    fake.reset()


def wait_for(compaction_id: int, statuses=("succeeded", "failed", "skipped"), seconds: float = 60) -> Compaction:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        record = Compaction.objects.get(pk=compaction_id)
        if record.status in statuses:
            return record
        time.sleep(0.1)
    raise AssertionError(f"compaction {compaction_id} still {record.status} after {seconds} s")


EXTRA: dict[str, subprocess.Popen] = {}


@contextlib.contextmanager
def extra_worker(worker: dict, name: str) -> Iterator[str]:
    """Another real worker process, on queues of its own (its compaction queue's name is yielded);
    stopped afterwards."""
    prefix = f"{worker['prefix']}{name}-"
    queue = prefix + "compaction"
    EXTRA[queue] = start_worker(
        queue=prefix,
        env={**worker["env"], "CTX_QUEUE_PREFIX": prefix},
        log_path=ROOT / "test-artifacts" / f"celery-worker-{name}.log",
    )
    try:
        yield queue
    finally:
        process = EXTRA.pop(queue)
        if process.poll() is None:
            stop_worker(process)


@pytest.fixture
def busy(session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, agent_rounds(24))
    return session


def test_appends_during_a_running_summary_are_kept_and_active(worker, busy):
    assert CHECKPOINT_FIELDS  # the worker's summarizer answers with this schema
    worker["fake"].set_delay(2.0, endpoint="messages")  # the LLM call takes a while
    record = compaction_runs.compaction_request(session=busy, level="summarize", user=None)
    tasks.compaction_send(record.pk)
    asked = len(worker["fake"].requests_for("messages"))
    wait_for(record.pk, statuses=("running",), seconds=30)
    # Inside the LLM call: its request reached the fake (the snapshot was read before it), the answer waits.
    deadline = time.monotonic() + 30
    while len(worker["fake"].requests_for("messages")) == asked and time.monotonic() < deadline:
        time.sleep(0.02)
    upto = busy.last_seq
    late = [{"role": "user", "content": f"late message {i}", "client_id": f"late-{i}"} for i in range(10)]
    for message in late:  # one by one, while the worker is inside the LLM call
        ingest.message_append(session=busy, messages=[normalize_message(message)])
    done = wait_for(record.pk)
    assert done.status == "succeeded", done.error
    assert done.upto_seq == upto
    rows = Message.objects.filter(session=busy, seq__gt=upto).order_by("seq")
    assert [(r.content, r.state, r.compaction_id) for r in rows] == [(m["content"], "active", None) for m in late]
    assert not Message.objects.filter(session=busy, seq__gt=upto).exclude(state="active").exists()
    assert worker["fake"].requests_for("messages"), "the summary went through the (fake) Anthropic API"


def test_one_compaction_per_session_however_many_ask(worker, busy):
    results: list[str] = []

    def ask() -> None:
        try:
            compaction_runs.compaction_request(session=busy, level="compact", user=None)
            results.append("queued")
        except Conflict:
            results.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["queued"] + ["refused"] * 7
    record = Compaction.objects.get(session=busy)
    claims: list[bool] = []

    def claim() -> None:
        claims.append(compaction_records.claim(record.pk))
        connection.close()

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert claims.count(True) == 1


def test_two_real_workers_handed_the_same_compaction_run_it_once(worker, busy):
    with extra_worker(worker, "second") as second_queue:
        worker["fake"].set_delay(1.0, endpoint="messages")
        record = compaction_runs.compaction_request(session=busy, level="summarize", user=None)
        for queue in (worker["queue"], second_queue, worker["queue"], second_queue):
            run_compaction.apply_async((record.pk,), queue=queue)  # a redelivery storm
        done = wait_for(record.pk)
        time.sleep(1.5)  # let the other deliveries arrive and be refused
    done.refresh_from_db()
    assert done.status == "succeeded" and done.attempts == 1
    assert len(worker["fake"].requests_for("messages")) == 1  # one summary, not two
    assert Compaction.objects.filter(session=busy).count() == 1


def test_a_dead_workers_compaction_is_reclaimed(worker, busy, settings):
    # A worker took it and died: the record is running, its start older than the hard time limit.
    record = Compaction.objects.create(session=busy, project_id=busy.project_id, level="compact", trigger="manual")
    assert compaction_records.claim(record.pk)
    Compaction.objects.filter(pk=record.pk).update(
        started_at=timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    )
    assert tasks.requeue_stale_compactions() == 1  # what beat runs every minute
    done = wait_for(record.pk)
    assert done.status == "succeeded" and done.attempts == 2


def test_a_worker_killed_mid_summary_leaves_a_record_another_worker_reclaims(worker, busy, settings):
    """A second real worker takes the compaction and is killed (SIGKILL) inside the slow LLM call;
    the record stays running, nothing changed, and once its start is older than the hard time limit
    the periodic recovery hands it to the other worker, which finishes it."""
    rows = rows_of(busy)
    with extra_worker(worker, "victim") as victim_queue:
        worker["fake"].set_delay(30.0, endpoint="messages")
        record = compaction_runs.compaction_request(session=busy, level="summarize", user=None)
        run_compaction.apply_async((record.pk,), queue=victim_queue)
        wait_for(record.pk, statuses=("running",), seconds=30)
        deadline = time.monotonic() + 30
        while not worker["fake"].requests_for("messages") and time.monotonic() < deadline:
            time.sleep(0.05)  # inside the LLM call now
        victim = EXTRA[victim_queue]
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=15)
    worker["fake"].set_delay(0, endpoint="messages")
    dead = Compaction.objects.get(pk=record.pk)
    assert dead.status == "running" and dead.attempts == 1
    assert rows_of(busy) == rows
    assert tasks.requeue_stale_compactions() == 0  # not stale yet: nobody steals a live-looking run
    Compaction.objects.filter(pk=record.pk).update(
        started_at=timezone.now() - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    )
    assert tasks.requeue_stale_compactions() == 1
    done = wait_for(record.pk)
    assert done.status == "succeeded" and done.attempts == 2


def test_a_failed_summary_changes_nothing(worker, busy):
    rows = rows_of(busy)
    worker["fake"].queue_error(400, endpoint="messages", times=5)  # permanent: no retry helps
    record = compaction_runs.compaction_request(session=busy, level="summarize", user=None)
    tasks.compaction_send(record.pk)
    done = wait_for(record.pk)
    assert done.status == "failed" and "400" in done.error
    assert rows_of(busy) == rows
    busy.refresh_from_db()
    assert busy.compaction_failures == 1 and busy.summary_tokens == 0


def test_transient_errors_are_retried(worker, busy):
    worker["fake"].queue_error(529, endpoint="messages", times=1, retry_after_ms=1)
    record = compaction_runs.compaction_request(session=busy, level="summarize", user=None)
    tasks.compaction_send(record.pk)
    done = wait_for(record.pk, seconds=90)
    assert done.status == "succeeded", done.error
    assert done.attempts == 2


def test_a_model_down_for_long_falls_back_to_the_offline_summary_with_a_warning(worker, busy):
    """Anthropic answers 529 to every call: the task retries with backoff, then summarizes offline
    rather than not at all, and STATUS says so."""
    worker["fake"].queue_error(529, endpoint="messages", times=100, retry_after_ms=1)
    record = compaction_runs.compaction_request(session=busy, level="summarize", user=None)
    tasks.compaction_send(record.pk)
    done = wait_for(record.pk, seconds=90)
    assert done.status == "succeeded", done.error
    assert len(worker["fake"].requests_for("messages")) == 5  # the first try and 4 retries
    assert any(note.startswith("The summarizer model was unavailable") for note in done.notes)
    busy.refresh_from_db()
    assert busy.summary_tokens > 0
    warnings = usage.session_status(busy)["warnings"]
    assert any("summarizer model was unavailable" in w and "529" in w for w in warnings), warnings
