"""ctxweb.postgres: Django's health check (``SELECT 1`` before a request's first statement) is skipped
for a connection that ended a request less than ``FRESH_SECONDS`` ago after using it without an
error, and still made otherwise; a connection that broke in between fails one request with a 503 and
is replaced for the next."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, close_old_connections, connections

from ctxweb.postgres import base
from sessions_app.models import Project

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The health checks the connection makes (each one's answer)."""
    made: list[bool] = []
    is_usable = base.DatabaseWrapper.is_usable

    def counted(self: base.DatabaseWrapper) -> bool:
        made.append(is_usable(self))
        return made[-1]

    monkeypatch.setattr(base.DatabaseWrapper, "is_usable", counted)
    return made


def request(use_database: bool = True) -> None:
    """What Django does around a request: old connections closed at its start and its end."""
    close_old_connections()
    try:
        if use_database:
            Project.objects.exists()
    finally:
        close_old_connections()


def test_a_connection_that_just_answered_is_not_checked_one_idle_longer_is(checks, monkeypatch):
    assert isinstance(connections["default"], base.DatabaseWrapper)
    request()  # connects (a new connection needs no check) and ends the request
    request()
    request()
    assert checks == []
    later = connections["default"].answered_at + base.FRESH_SECONDS + 0.01
    monkeypatch.setattr(base.time, "monotonic", lambda: later)
    request()
    assert checks == [True]


def test_a_request_that_did_not_use_the_connection_does_not_vouch_for_it(checks, monkeypatch):
    request()
    answered = connections["default"].answered_at
    request(use_database=False)
    assert connections["default"].answered_at == answered
    monkeypatch.setattr(base.time, "monotonic", lambda: answered + base.FRESH_SECONDS + 0.01)
    request()
    assert checks == [True]


def test_a_connection_after_a_database_error_is_checked_and_not_vouched_for(checks):
    request()
    close_old_connections()
    with pytest.raises(DatabaseError), connections["default"].cursor() as cursor:
        cursor.execute("SELECT * FROM no_such_table_here")
    answered = connections["default"].answered_at
    close_old_connections()  # the request's end: the error is checked for (Django's own check)
    assert checks == [True] and connections["default"].answered_at == answered


def test_a_connection_broken_within_the_second_fails_one_request_and_is_replaced(checks):
    request()
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:  # as a server restart would
            cursor.execute("SELECT pg_terminate_backend(%s)", [pid])
    finally:
        other.close()
    close_old_connections()
    with pytest.raises(DatabaseError):  # the first statement fails: the request answers 503
        Project.objects.exists()
    close_old_connections()  # its end: the broken connection is dropped
    request()  # the next request connects afresh
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid


def test_a_request_that_failed_vouches_for_nothing_newer_than_its_last_use(checks, monkeypatch):
    request()
    close_old_connections()
    with pytest.raises(DatabaseError), connections["default"].cursor() as cursor:
        cursor.execute("SELECT * FROM no_such_table_here")
    close_old_connections()  # its end: Django's own check (the connection is usable)
    used = connections["default"].used_at
    monkeypatch.setattr(base.time, "monotonic", lambda: used + 20)  # the next request, long after (within CONN_MAX_AGE)
    request()
    assert checks == [True, True]  # at the failed request's end, and before the next one's first statement


def test_a_request_that_used_the_connection_long_before_it_ended_is_checked_next(checks, monkeypatch):
    request()
    close_old_connections()
    Project.objects.exists()  # then a stream, say, goes on for 20 s with no statement
    used = connections["default"].used_at
    monkeypatch.setattr(base.time, "monotonic", lambda: used + 20)
    close_old_connections()  # the stream's end
    assert connections["default"].answered_at == used
    request()
    assert checks == [True]
