"""The test database as the embedded mode keeps it: requests at once are transactions apart."""

from __future__ import annotations

import pytest


@pytest.mark.django_db(transaction=True)
def test_the_live_server_hands_no_connection_of_its_own_to_its_request_threads(live_server):
    """An in-memory SQLite database is one connection that Django's live server lends every request
    thread: two requests at once would share a transaction (one's rollback taking the other's
    rows). Each thread opens its own, as under gunicorn or runserver."""
    from django.db import connection

    assert connection.vendor != "sqlite" or not connection.is_in_memory_db()
    assert live_server.thread.connections_override == {}
