"""Concurrent appends on Postgres: the session row lock keeps seqs gapless and totals exact."""

from __future__ import annotations

import threading

import pytest
from django.db import connection
from django.db.models import Sum

from compaction.messages import normalize_message
from sessions_app.models import AgentSession, Message
from sessions_app.services import agent_sessions, ingest

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

THREADS = 8
BATCHES = 6


def test_eight_threads_appending_to_one_session(team):
    session = agent_sessions.session_create(user=team.bob.user, project=team.project, name="contended")
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def agent(n: int) -> None:
        try:
            start.wait()
            for b in range(BATCHES):
                batch = [
                    normalize_message(
                        {
                            "role": "user",
                            "content": f"agent {n} batch {b} item {i} " + "word " * (n + i),
                            "client_id": f"{n}-{b}-{i}",
                        }
                    )
                    for i in range(3)
                ]
                ingest.message_append(session=session, messages=batch)
                # A retry of the same batch must store nothing new.
                if b == 0:
                    ingest.message_append(session=session, messages=batch)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []

    session.refresh_from_db()
    seqs = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", flat=True))
    expected = THREADS * BATCHES * 3
    assert seqs == list(range(1, expected + 1))
    assert session.last_seq == session.message_count == session.active_message_count == expected
    assert session.message_tokens == Message.objects.filter(session=session).aggregate(t=Sum("tokens"))["t"]
    assert Message.objects.filter(session=session).values("client_id").distinct().count() == expected


def test_concurrent_retries_of_one_client_id_store_it_once(team):
    session = agent_sessions.session_create(user=team.bob.user, project=team.project, name="retries")
    start = threading.Barrier(THREADS)
    results: list[int] = []

    def retry() -> None:
        try:
            start.wait()
            out = ingest.message_append(
                session=session, messages=[normalize_message({"role": "user", "content": "once", "client_id": "same"})]
            )
            results.append(out.messages[0].pk)
        finally:
            connection.close()

    threads = [threading.Thread(target=retry) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == THREADS and len(set(results)) == 1
    assert AgentSession.objects.get(pk=session.pk).message_count == 1
