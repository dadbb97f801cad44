"""Migration 0007 repairs rows stored before created_at was checked: a moment Python's datetime can't
hold (year 0 or 10000 in UTC) made every read of its session fail."""

from __future__ import annotations

import importlib

import pytest
from django.db import connection
from django.db.utils import DataError

from sessions_app.models import Message

pytestmark = [pytest.mark.django_db, pytest.mark.services]

repair = importlib.import_module("sessions_app.migrations.0007_ingest_rejections")


@pytest.mark.parametrize("stored", ["0001-01-01T00:00:00+14:00", "9999-12-31T23:59:59-01:00"])
def test_unreadable_dates_take_the_time_they_were_received(session_of, stored):
    session = session_of()
    ok = Message.objects.create(
        session=session, seq=1, role="user", content="fine", tokens=1, created_at="2025-01-01T00:00Z"
    )
    bad = Message.objects.create(
        session=session, seq=2, role="user", content="bad", tokens=1, created_at="2025-01-01T00:00Z"
    )
    with connection.cursor() as cursor:
        cursor.execute("UPDATE sessions_app_message SET created_at = %s::timestamptz WHERE id = %s", [stored, bad.pk])
    with pytest.raises(DataError):  # what every read did before: psycopg can't make a datetime of it
        list(Message.objects.filter(session=session).values_list("created_at", flat=True))
    with connection.schema_editor() as editor:
        repair.repair_dates(None, editor)
    dates = dict(Message.objects.filter(session=session).values_list("pk", "created_at"))
    bad.refresh_from_db()
    assert dates[bad.pk] == bad.received_at
    assert dates[ok.pk].isoformat() == "2025-01-01T00:00:00+00:00"
