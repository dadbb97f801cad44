"""Recording is correct under concurrency (issue 28): any interleaving and any duplication of the
recordings of a conversation's exchanges gives what recording them one by one gives.

Several web processes, each with its recorder threads (``api/proxy_recorder``), record a
conversation's exchanges in whatever order their jobs run: an exchange's request late, after a later
one's; the same exchange twice; a request recorded before it went upstream (``proxy_compaction``) and
its reply on its own afterwards. Each schedule of such recordings must leave the sessions (how many,
their names, their links) and the messages (roles, what they say, their order) that recording the
exchanges one by one leaves, with no note standing in for a message, no rejection and no warning.
The conversations are generated (``agent_conversations``) or the recorded Claude Code run's."""

from __future__ import annotations

import copy
import logging
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

import pytest
from django.db import connections
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app import steps
from sessions_app.api.proxy.dialects import ANTHROPIC
from sessions_app.models import CONTEXT_STATES, AgentSession, IngestRejection, Message, ToolUse
from sessions_app.selectors import session_rows
from sessions_app.selectors.session_rows import Ends
from sessions_app.services import proxy
from sessions_app.services.proxy import recording
from sessions_app.services.proxy.identity import agent_conversation, conversation_key
from sessions_app.services.proxy.messages import identity
from tests.hypothesis_budget import DATABASE
from tests.proxy.agent_conversations import Exchange, claude_code, held, scripts

NOTE = "[ctxweb: this message could not be stored"

# A recording: ("exchange" | "request" | "reply", the exchange's index, how many recordings before it
# its session was read: a recorder thread reads it, then others store theirs before it stores its own).
Op = tuple[str, int, int]


@st.composite
def schedules(draw: Any, exchanges: int, starts: tuple[int, ...] = (0,)) -> list[Op]:
    """The recordings of a conversation's exchanges, in any order, some twice. An exchange is recorded
    whole once its answer is out, or (``proxy_compaction``) its request before it goes upstream and
    its reply once the answer is out: then the reply's first recording comes after the request's.
    ``starts``: the first exchange of each segment of the conversation (a client's compaction starts
    one). A client compacts between two requests with a request of its own (its model summarizing the
    conversation): a segment's exchanges are first recorded after the one before's, and again anywhere."""
    order: list[tuple[str, int]] = []
    for first, end in zip(starts, [*starts[1:], exchanges], strict=True):
        ops: list[tuple[str, int]] = []
        for n in range(first, end):
            ops += [("request", n), ("reply", n)] if draw(st.booleans()) else [("exchange", n)]
        ops = list(draw(st.permutations(ops)))
        for n in range(first, end):
            if ("reply", n) in ops and ops.index(("reply", n)) < ops.index(("request", n)):
                first_reply, its_request = ops.index(("reply", n)), ops.index(("request", n))
                ops[first_reply], ops[its_request] = ops[its_request], ops[first_reply]
        order += ops
    for op in draw(st.lists(st.sampled_from(order), max_size=exchanges)):  # again, any time after the first
        later = [first for first in starts if first > op[1]]
        # … but a reply on its own (its request recorded before it went upstream) before the next segment:
        # nothing tells it from a reply to the request at its place after the client's compaction.
        end = min((i for i, (_, n) in enumerate(order) if later and n >= later[0]), default=len(order))
        order.insert(draw(st.integers(order.index(op) + 1, end if op[0] == "reply" else len(order))), op)
    lags = draw(st.lists(st.integers(0, 3), min_size=len(order), max_size=len(order)))
    return [(kind, n, lag) for (kind, n), lag in zip(order, lags, strict=True)]


def one_by_one(exchanges: int) -> list[Op]:
    return [("exchange", n, 0) for n in range(exchanges)]


@dataclass
class Recording:
    """One conversation's exchanges recorded as the proxy records them: the session is looked up when
    a request arrives (the requests arrive in order), the rest when its recording job runs."""

    team: Any
    exchanges: list[Exchange]
    kept: list[dict[str, Any]] = field(init=False)
    key: str = field(init=False)
    sessions: dict[int, int] = field(default_factory=dict)  # exchange → the session it records into
    lock: threading.Lock = field(default_factory=threading.Lock)
    requested: dict[int, threading.Event] = field(default_factory=dict)  # exchange → its request is recorded
    seen: list[dict[int, tuple[AgentSession, Ends]]] = field(
        default_factory=list
    )  # sessions read before each recording
    request_read: dict[int, int] = field(default_factory=dict)  # exchange → its request's recording, in ``seen``

    def __post_init__(self) -> None:
        self.kept = [ANTHROPIC.recorded(e.body) or {} for e in self.exchanges]
        self.key = ""
        self.requested = {n: threading.Event() for n in range(len(self.exchanges))}

    def session_of(self, n: int) -> int:
        """As ``api.proxy_views._prepare`` finds it (the requests before this one arrived before it)."""
        with self.lock:
            for m in range(n + 1):
                if m not in self.sessions:
                    body = self.kept[m]
                    found = proxy.proxy_session_for(
                        user=self.team.bob.user,
                        project=self.team.project,
                        key=conversation_key(body, None),
                        body=body,
                        agent=agent_conversation(body, None),
                    )
                    self.sessions[m], self.key = found.pk, found.external_id
            return self.sessions[n]

    def run(self, op: Op, *, lagging: bool = True) -> None:
        """``lagging``: the session is read ``lag`` recordings before this one stores (one at a time); else
        as it is (the recordings run at once in threads, and lag as they will)."""
        kind, n, lag = op
        session_id, body, answer = self.session_of(n), self.kept[n], self.exchanges[n].answer
        if kind == "reply":  # its request was recorded before it went upstream
            assert self.requested[n].wait(30)
            session_id = self.sessions[n]
        if lagging:
            self.seen.append({pk: r for pk in set(self.sessions.values()) if (r := session_rows.session_and_ends(pk))})
            if kind == "reply":  # its job is queued once the answer is out: after its request was recorded
                lag = min(lag, len(self.seen) - 2 - self.request_read[n])
        read = self.seen[-1 - lag].get(session_id) if lagging and lag < len(self.seen) else None
        with read_once(read):
            if kind == "request":
                session = proxy.proxy_session(session_id)
                assert session is not None
                done = steps.proxy_request_record(session=session, body=body, key=self.key)
                self.sessions[n] = done.session.pk
                self.request_read.setdefault(n, len(self.seen) - 1)
                self.requested[n].set()
                return
            steps.proxy_exchange_record(
                session_id=session_id,
                after_seq=len(body["messages"]),
                pending=body if kind == "exchange" else None,
                message=answer,
                complete=True,
                key=self.key,
            )


@contextmanager
def read_once(read: tuple[AgentSession, Ends] | None) -> Iterator[None]:
    """The recording's first read of its session gives the session (with its last messages) as it
    was read before."""
    if read is None:
        yield
        return
    session, ends = read
    real, real_with_ends, reads = proxy.proxy_session, session_rows.session_and_ends, []

    def first(session_id: int) -> bool:
        reads.append(session_id)
        return len(reads) == 1 and session_id == session.pk

    def first_as_before(session_id: int) -> AgentSession | None:
        return copy.copy(session) if first(session_id) else real(session_id)

    def first_with_ends_as_before(session_id: int) -> tuple[AgentSession, Ends] | None:
        return (copy.copy(session), ends) if first(session_id) else real_with_ends(session_id)

    # Where the recording reads it (``services.proxy.recording``) and where this test's requests do.
    with (
        mock.patch.object(recording, "proxy_session", first_as_before),
        mock.patch.object(proxy, "proxy_session", first_as_before),
        mock.patch.object(session_rows, "session_and_ends", first_with_ends_as_before),
    ):
        yield


def stored(team: Any, session_id: str) -> list[tuple[str, int | None, list[tuple[str, Any]]]]:
    """The conversation's sessions (name, the parent's place among them, messages: role and what it
    says), each checked for what must hold of any session."""
    sessions = list(
        AgentSession.objects.filter(project=team.project, external_id__startswith=session_id).order_by("pk")
    )
    place = {s.pk: n for n, s in enumerate(sessions)}
    found = []
    for session in sessions:
        rows = list(Message.objects.filter(session=session).order_by("seq"))
        assert [r.seq for r in rows] == list(range(1, len(rows) + 1)) and session.last_seq == len(rows)
        in_context = sum(r.tokens for r in rows if r.state in CONTEXT_STATES)
        assert session.message_count == len(rows) and session.message_tokens == in_context
        calls = sorted(
            b["id"] for r in rows if isinstance(r.content, list) for b in r.content if b.get("type") == "tool_use"
        )
        assert sorted(ToolUse.objects.filter(session=session).values_list("tool_use_id", flat=True)) == calls
        assert not any(NOTE in str(r.content) for r in rows), [r.content for r in rows if NOTE in str(r.content)]
        assert not IngestRejection.objects.filter(session=session).exists()
        assert session.count_warning == ""
        parent = place.get(session.parent_id) if session.parent_id is not None else None
        found.append((session.name, parent, [(r.role, identity(r.content)) for r in rows]))
    return found


def recorded(
    team: Any, exchanges: list[Exchange], schedule: list[Op]
) -> list[tuple[str, int | None, list[tuple[str, Any]]]]:
    recording = Recording(team, exchanges)
    for op in schedule:
        recording.run(op)
    return stored(team, recording.key.split("#")[0])


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("sessions_app")
    ]


@pytest.mark.django_db
@settings(DATABASE)
@given(data=st.data(), script=scripts())
def test_any_schedule_of_recordings_gives_what_one_by_one_gives(team, caplog, data, script):
    caplog.set_level(logging.INFO)
    caplog.clear()  # the examples before this one logged into it too
    exchanges = script.exchanges(str(uuid.uuid4()))
    alone = recorded(team, exchanges, one_by_one(len(exchanges)))
    assert len(alone) == 1 and alone[0][2] == held(exchanges)
    again = script.exchanges(str(uuid.uuid4()))
    schedule = data.draw(schedules(len(again), tuple(script.starts())))
    assert recorded(team, again, schedule) == alone, schedule
    assert warnings_of(caplog) == []


@pytest.mark.django_db
@settings(DATABASE)
@given(data=st.data())
def test_claude_codes_own_requests_in_any_schedule_give_what_one_by_one_gives(team, caplog, data):
    caplog.set_level(logging.INFO)
    caplog.clear()  # the examples before this one logged into it too
    exchanges = claude_code(str(uuid.uuid4()))
    alone = recorded(team, exchanges, one_by_one(len(exchanges)))
    assert len(alone) == 1 and alone[0][2] == held(exchanges)
    again = claude_code(str(uuid.uuid4()))
    schedule = data.draw(schedules(len(again)))
    assert recorded(team, again, schedule) == alone, schedule
    assert warnings_of(caplog) == []


# ----------------------------------------------------------------------------- at once, on Postgres


def at_once(recording: Recording, lanes: list[list[Op]]) -> None:
    """Each lane's recordings in a thread of its own (a recorder thread of some web process), all
    started together, each with its own database connection."""
    start = threading.Barrier(len(lanes))
    failures: list[BaseException] = []

    def lane(ops: list[Op]) -> None:
        try:
            start.wait(10)
            for op in ops:
                recording.run(op, lagging=False)
        except BaseException as exc:  # reported by the test's thread
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=lane, args=(ops,)) for ops in lanes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@settings(DATABASE)
@given(data=st.data(), script=scripts(compactions=False), lanes=st.integers(2, 4))
def test_recordings_at_once_in_several_threads_give_what_one_by_one_gives(team, caplog, data, script, lanes):
    caplog.set_level(logging.INFO)
    caplog.clear()  # the examples before this one logged into it too
    exchanges = script.exchanges(str(uuid.uuid4()))
    alone = recorded(team, exchanges, one_by_one(len(exchanges)))
    again = script.exchanges(str(uuid.uuid4()))
    schedule = data.draw(schedules(len(again)))
    recording = Recording(team, again)
    recording.session_of(0)  # the first request made the session before anything was recorded
    at_once(recording, [schedule[n::lanes] for n in range(lanes)])
    assert stored(team, recording.key.split("#")[0]) == alone, schedule
    assert warnings_of(caplog) == []
