"""The spend rollup (``DailySpend``) and each request's ``saved_tokens`` (``services.spend_rollup``):
after any sequence of proxied requests, transcript responses (new and brought up to date, moved to
another session), compactions coming into force, reverts and deleted sessions, every bucket equals
the sums over the ``ProviderRequest`` rows, and every row's saving equals the savings definition
(docs/PROXY.md, "What compaction saved") worked out here in Python from the compactions. Two
recorders adding to one bucket at once both count (Postgres, threads)."""

from __future__ import annotations

import importlib
import threading
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from hypothesis import given
from hypothesis import strategies as st

from compaction.model_prices import TokenUsage
from compaction.transcripts import ResponseUsage
from sessions_app.models import (
    COST_UNITS,
    AgentSession,
    ApiKey,
    Compaction,
    CompactionStatus,
    DailySpend,
    ProviderRequest,
)
from sessions_app.selectors.spend import project_spend
from sessions_app.services import agent_sessions, spend_rollup
from sessions_app.services.provider_requests import Answered, provider_request_record
from sessions_app.services.transcript_usage import transcript_requests_record
from tests.hypothesis_budget import DATABASE

T0 = datetime(2026, 5, 10, 22, 0, tzinfo=UTC)  # near midnight: requests fall on two or three UTC days
MODELS = ["claude-sonnet-4-5", "claude-haiku-4-5", "mystery-model"]

minutes = st.integers(min_value=0, max_value=60 * 30)
tokens = st.integers(min_value=0, max_value=50_000)
proxied = st.tuples(
    st.just("proxy"), st.integers(0, 1), minutes, st.sampled_from(MODELS), tokens, tokens, st.integers(0, 2),
    st.booleans(),
)  # fmt: skip
reported = st.tuples(
    st.just("transcript"), st.integers(0, 1), minutes, st.sampled_from(MODELS), tokens, tokens, st.integers(0, 3),
    st.integers(0, 1),
)  # fmt: skip
compacted = st.tuples(st.just("compaction"), st.integers(0, 1), minutes, st.integers(-50, 5_000))
reverted = st.tuples(st.just("revert"), st.integers(0, 1))
deleted = st.tuples(st.just("delete"), st.integers(0, 1))
steps = st.lists(st.one_of(proxied, reported, compacted, reverted, deleted), min_size=1, max_size=14)


def expected_buckets(project_id: int) -> dict[tuple[Any, ...], list[int]]:
    found: dict[tuple[Any, ...], list[int]] = defaultdict(lambda: [0] * len(spend_rollup.SUMS))
    for row in ProviderRequest.objects.filter(project_id=project_id):
        key = (row.project_id, row.created_at.astimezone(UTC).date(), row.user_id or 0, row.api_key_id or 0, row.model)
        cost = row.cost_usd
        figures = (
            1,
            int(cost is None),
            row.input_tokens,
            row.cache_creation_input_tokens,
            row.cache_read_input_tokens,
            row.output_tokens,
            0 if cost is None else int(cost * COST_UNITS),
            row.saved_tokens,
        )
        for n, value in enumerate(figures):
            found[key][n] += value
    return dict(found)


def stored_buckets(project_id: int) -> dict[tuple[Any, ...], list[int]]:
    found = {}
    for bucket in DailySpend.objects.filter(project_id=project_id):
        sums = [getattr(bucket, name) for name in spend_rollup.SUMS]
        if any(sums):
            key = (bucket.project_id, bucket.day, bucket.user_id, bucket.api_key_id, bucket.model)
            found[key] = sums
    return found


def defined_saving(row: ProviderRequest) -> int:
    """The savings definition, from the compactions in Python: every succeeded compaction of the
    request's session that finished by the time it arrived, or that it was made from."""
    return sum(
        c.tokens_before - c.tokens_after
        for c in Compaction.objects.filter(session_id=row.session_id)
        if c.status == CompactionStatus.SUCCEEDED
        and c.tokens_before is not None
        and c.tokens_after is not None
        and ((c.finished_at is not None and c.finished_at <= row.created_at) or c.pk == row.compacted_id)
    )


def assert_consistent(project_id: int) -> None:
    assert stored_buckets(project_id) == expected_buckets(project_id)
    for row in ProviderRequest.objects.filter(project_id=project_id):
        assert row.saved_tokens == defined_saving(row), row.pk


@pytest.mark.django_db
@DATABASE
@given(steps=steps)
def test_the_rollup_is_the_sum_of_the_rows_after_any_sequence(team, steps):
    keys = [ApiKey.objects.get(user=team.alice.user), ApiKey.objects.get(user=team.bob.user), None]
    sessions: list[AgentSession | None] = [
        agent_sessions.session_create(user=p.user, project=team.project, name=f"s{n}", model=MODELS[0])
        for n, p in enumerate((team.alice, team.bob))
    ]
    keyed_by = sessions[0]  # the transcript rows' keys: moving to the other session is an update
    last: dict[int, Compaction | None] = {}
    for step in steps:
        kind, which = step[0], step[1]
        session = sessions[which]
        if session is None:
            continue
        if kind == "proxy":
            _, _, at, model, read, out, key_n, from_compaction = step
            key = keys[key_n]
            made = last.get(session.pk) if from_compaction else None
            used = spend_rollup_used(model, read, out)
            provider_request_record(
                session=session,
                answered=Answered(
                    key=uuid.uuid4(), arrived_at=T0 + timedelta(minutes=at), status=200, model=model, used=used,
                    user_id=key.user_id if key else None, api_key_id=key.pk if key else None,
                    compacted_id=made.pk if made else None,
                ),
            )  # fmt: skip
        elif kind == "transcript":
            _, _, at, model, read, out, response, _ = step
            usage = {"input_tokens": read, "output_tokens": out, "cache_read_input_tokens": read // 3}
            stamp = (T0 + timedelta(minutes=at)).isoformat()
            transcript_requests_record(
                session=session,
                keyed_by=keyed_by,
                responses=[ResponseUsage(f"r{response}", "anthropic", usage, model, stamp)],
            )
        elif kind == "compaction":
            _, _, at, saving = step
            record = Compaction.objects.create(
                session=session, project_id=session.project_id,
                level="compact", status=CompactionStatus.SUCCEEDED, trigger="manual",
                tokens_before=10_000, tokens_after=10_000 - saving, finished_at=T0 + timedelta(minutes=at),
            )  # fmt: skip
            spend_rollup.session_savings_refresh(session.pk)  # what every succeeding service calls
            last[session.pk] = record
        elif kind == "revert":
            record = last.get(session.pk)
            if record is not None:
                Compaction.objects.filter(pk=record.pk).update(status=CompactionStatus.REVERTED)
                spend_rollup.session_savings_refresh(session.pk)  # what compaction_revert calls
                last[session.pk] = None
        else:
            agent_sessions.session_delete(session=session)
            sessions[which] = None
        assert_consistent(team.project.pk)
    # The project's spend reads the same figures as the rows summed directly.
    rows = ProviderRequest.objects.filter(project=team.project)
    total = project_spend(project=team.project, days=60, by="key", now=T0 + timedelta(days=3)).total
    assert total.requests == rows.count()
    assert total.saved_tokens == sum(r.saved_tokens for r in rows)
    priced = [r.cost_usd for r in rows if r.cost_usd is not None]
    if priced:
        assert total.cost_usd == sum(priced, Decimal(0))


def spend_rollup_used(model: str, read: int, out: int) -> Any:
    from sessions_app.services.provider_usage import Used

    return Used(model=model, tokens=TokenUsage(input=read, cache_read=read // 2, output=out))


@pytest.mark.postgres  # SQLite's test database takes one writer at a time
@pytest.mark.django_db(transaction=True)
def test_two_recorders_adding_to_one_bucket_at_once_both_count(team):
    """Threads, each on its own connection, record requests of the same bucket at once."""
    sessions = [
        agent_sessions.session_create(user=team.alice.user, project=team.project, name=f"t{n}", model=MODELS[0])
        for n in range(4)
    ]
    barrier = threading.Barrier(len(sessions))
    errors: list[BaseException] = []

    def record(session: AgentSession) -> None:
        try:
            barrier.wait()
            for _ in range(10):
                provider_request_record(
                    session=session,
                    answered=Answered(
                        key=uuid.uuid4(), arrived_at=T0, status=200, model=MODELS[0],
                        used=spend_rollup_used(MODELS[0], 100, 10), user_id=team.alice.user.pk,
                    ),
                )  # fmt: skip
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=record, args=(s,)) for s in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    (bucket,) = DailySpend.objects.filter(project=team.project)
    assert bucket.requests == 40 == ProviderRequest.objects.filter(project=team.project).count()
    assert stored_buckets(team.project.pk) == expected_buckets(team.project.pk)


@pytest.mark.django_db
def test_the_migration_fills_the_rollup_and_the_savings_from_the_rows_already_stored(team):
    from django.apps import apps

    fill = importlib.import_module("sessions_app.migrations.0036_rollup").fill
    alice_key = ApiKey.objects.get(user=team.alice.user)
    session = agent_sessions.session_create(user=team.alice.user, project=team.project, name="m", model=MODELS[0])
    made = Compaction.objects.create(
        session=session, project_id=session.project_id,
        level="compact", status=CompactionStatus.SUCCEEDED, trigger="manual",
        tokens_before=9_000, tokens_after=4_000, finished_at=T0 + timedelta(hours=1),
    )  # fmt: skip
    Compaction.objects.create(  # reverted: saves nothing
        session=session, project_id=session.project_id,
        level="compact", status=CompactionStatus.REVERTED, trigger="manual",
        tokens_before=9_000, tokens_after=1_000, finished_at=T0,
    )  # fmt: skip
    plan = [  # minutes after T0, key, model, cost, made from the compaction
        (0, alice_key, MODELS[0], Decimal("0.0123456789"), False),  # before it: saves nothing
        (30, None, MODELS[0], Decimal("0.5"), True),  # the proxy compacted for it
        (150, alice_key, MODELS[0], Decimal("0.25"), False),  # after it, the next UTC day
        (155, alice_key, "mystery-model", None, False),
    ]
    for at, key, model, cost, from_it in plan:
        ProviderRequest.objects.create(  # as stored before the rollup existed
            key=uuid.uuid4(), session=session, project=team.project, user=team.alice.user, api_key=key,
            created_at=T0 + timedelta(minutes=at), model=model, input_tokens=at + 1, output_tokens=7,
            cost_usd=cost, compacted=made if from_it else None,
        )  # fmt: skip
    DailySpend.objects.all().delete()
    fill(apps, None)
    saved = list(ProviderRequest.objects.order_by("created_at").values_list("saved_tokens", flat=True))
    assert saved == [0, 5_000, 5_000, 5_000]
    assert_consistent(team.project.pk)
    assert len(stored_buckets(team.project.pk)) == 4  # the key's and the key-less one's day; the next day's two
