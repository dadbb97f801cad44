"""What ctxweb stores of a value a test sent (the value with its secrets replaced by markers, under the
project's rules: ``services.redaction``), for tests that compare what is stored with what was sent;
and every row of the database as text, for tests that look for a secret in all of it."""

from __future__ import annotations

from typing import Any


def as_stored(project: Any, value: Any) -> Any:
    from sessions_app.services import redaction

    return redaction.value_redact(project, value).value


def table_text() -> str:
    """Every row of every table of the database, as text (JSON and bytes included)."""
    from django.db import connection

    found: list[str] = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names():
            cursor.execute(f"SELECT * FROM {connection.ops.quote_name(table)}")
            found.extend(repr(row) for row in cursor.fetchall())
    return "\n".join(found)
