"""Model rows read with SQL written once, for the few lookups every request makes (the API key, the
session with its project and policy, the session locked for an append).

Django compiles a queryset anew on each call: for these lookups its compiling and object building
cost five to ten times the query itself (docs/BENCHMARKS.md, "Where the CPU of the hot paths goes").
Here the column lists come from the models' own fields, so a migration that adds a column changes
the SQL with it, and the rows become model instances the way the ORM makes them (``Model.from_db``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, NamedTuple, TypeVar

from django.db import DatabaseError, connection, models

_M = TypeVar("_M", bound=models.Model)


@cache
def _fields(model: type[models.Model], leave_out: frozenset[str]) -> tuple[_Read, ...]:
    """The model's concrete fields read, ``leave_out`` (names) deferred: each with its column and what
    turns the database's value into the attribute's (as the ORM's compiler does: JSON parsed, SQLite's
    dates made datetimes)."""
    read = []
    for field in model._meta.concrete_fields:
        if field.name in leave_out:
            continue
        col = field.get_col(model._meta.db_table)
        converters = (*connection.ops.get_db_converters(col), *col.get_db_converters(connection))
        read.append(_Read(field.attname, field.column, col, converters))
    return tuple(read)


class _Read(NamedTuple):
    attname: str
    column: str
    col: Any
    converters: tuple[Any, ...]


def select_list(model: type[models.Model], alias: str, leave_out: frozenset[str] = frozenset()) -> str:
    """``alias."col", …`` for the model's fields: the part of a SELECT that ``instance`` reads back."""
    qn = connection.ops.quote_name
    return ", ".join(f"{alias}.{qn(read.column)}" for read in _fields(model, leave_out))


def width(model: type[models.Model], leave_out: frozenset[str] = frozenset()) -> int:
    """How many columns ``select_list`` gives."""
    return len(_fields(model, leave_out))


def instance(model: type[_M], values: Sequence[Any], leave_out: frozenset[str] = frozenset()) -> _M:
    """A model instance from a row of ``select_list``'s columns, as the ORM builds it; the fields left
    out are deferred (read on first use, as with ``defer``)."""
    fields = _fields(model, leave_out)
    converted = []
    for read, value in zip(fields, values, strict=True):
        for converter in read.converters:
            value = converter(value, read.col, connection)
        converted.append(value)
    return model.from_db(connection.alias, [read.attname for read in fields], converted)


def update(instance: models.Model, fields: Sequence[str]) -> None:
    """``instance.save(update_fields=fields)`` (``auto_now`` fields set as ``save`` sets them), with
    the UPDATE written once per model and set of fields. No signals: the models read here send none."""
    model = type(instance)
    sql, written = _update_sql(model, tuple(fields))
    values = [field.get_db_prep_save(field.pre_save(instance, False), connection) for field in written]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, instance.pk])
        if cursor.rowcount != 1:  # as ``save`` does: the row is gone
            raise DatabaseError(f"{model.__name__} {instance.pk} was not updated: no such row.")


@cache
def _update_sql(model: type[models.Model], fields: tuple[str, ...]) -> tuple[str, tuple[Any, ...]]:
    qn = connection.ops.quote_name
    written = tuple(model._meta.get_field(name) for name in fields)
    assignments = ", ".join(f"{qn(str(field.column))} = %s" for field in written)  # type: ignore[union-attr]
    return f"UPDATE {qn(model._meta.db_table)} SET {assignments} WHERE {qn(model._meta.pk.column)} = %s", written
