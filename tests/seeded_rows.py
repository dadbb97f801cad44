"""The rows migrations seed (model profiles, the periodic tasks), put back after every transactional test.

A transactional test ends with a flush of every table. Django's post-migrate signal recreates content
types and permissions, but not what data migrations wrote, so a later test in the same xdist worker
would meet a database with no model profiles and no periodic tasks — an order-dependent failure.
Django's ``serialized_rollback`` restores before its own test, not after, and its deserialization
clashes with the content types another transactional test's flush recreated; this restores after
each one instead, with the rows read once right after the test database was migrated.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pytest_django.plugin import blocking_manager_key

# Recreated by the flush's post-migrate signal, with new ids: loading them again would clash.
_RECREATED_BY_FLUSH = {"contenttypes.contenttype", "auth.permission"}
_TRANSACTIONAL_FIXTURES = {
    "transactional_db", "live_server", "django_db_reset_sequences", "django_db_serialized_rollback",
}  # fmt: skip
_seeded: dict[str, list[dict]] = {}  # database alias → its seeded rows, as Django serializes them


def _is_transactional(item: pytest.Item) -> bool:
    marker = item.get_closest_marker("django_db")
    if marker is not None and (marker.kwargs.get("transaction") or (marker.args and marker.args[0])):
        return True
    return bool(_TRANSACTIONAL_FIXTURES & set(getattr(item, "fixturenames", ())))


def remember() -> None:
    """Read the seeded rows (``conftest.django_db_setup``: right after the test databases are migrated)."""
    from django.db import connections

    for alias in connections:
        rows = json.loads(connections[alias].creation.serialize_db_to_string())
        _seeded[alias] = [row for row in rows if row["model"] not in _RECREATED_BY_FLUSH]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield  # the test's fixtures are torn down here, the flush among them
    if nextitem is None or not _seeded or not _is_transactional(item):
        return  # the last test: its teardown also dropped the test databases
    with item.config.stash[blocking_manager_key].unblock():
        restore_seeded_rows()


def restore_seeded_rows() -> None:
    """Load the seeded rows of every table the flush emptied. A table that holds rows was not flushed
    (a test that only looks transactional: a live server but no database of its own) and is left."""
    from django.apps import apps
    from django.core.management.color import no_style
    from django.db import connections

    for alias, rows in _seeded.items():
        labels = {row["model"] for row in rows}
        emptied = {label for label in labels if not apps.get_model(label).objects.using(alias).exists()}
        if emptied:
            connection = connections[alias]
            kept = [row for row in rows if row["model"] in emptied]
            connection.creation.deserialize_db_from_string(json.dumps(kept))
            # Rows loaded with their ids leave Postgres' sequences behind them: set them past (as loaddata).
            statements = connection.ops.sequence_reset_sql(no_style(), [apps.get_model(x) for x in emptied])
            with connection.cursor() as cursor:
                for statement in statements:
                    cursor.execute(statement)
