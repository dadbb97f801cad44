"""Model rows read with SQL written once, for the few lookups every request makes (the API key, the
session with its project and policy, the session locked for an append).

Django compiles a queryset anew on each call: for these lookups its compiling and object building
cost five to ten times the query itself (docs/BENCHMARKS.md, "Where the CPU of the hot paths goes").
Here the column lists come from the models' own fields, so a migration that adds a column changes
the SQL with it, and the rows become model instances the way the ORM makes them (``Model.from_db``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import Any, NamedTuple, TypeVar

from django.conf import settings
from django.db import DatabaseError, connection, models

_M = TypeVar("_M", bound=models.Model)


@contextmanager
def prepared_cursor() -> Iterator[Any]:
    """A cursor for a statement written once here (a fixed shape, a bounded number of parameters).
    On PostgreSQL its parameters go apart from the statement (server-side binding) and psycopg
    prepares it on its first use on a connection (``CTX_DB_PREPARED_STATEMENTS``): Postgres stops
    parsing and planning it on every request. Preparing is switched on only for these statements;
    Django's own cursors bind on the client (not preparable), and with a threshold set on the
    connection psycopg would count each of their statements, values and all, in its cache.
    Elsewhere, or with prepared statements off, Django's cursor."""
    if connection.vendor != "postgresql" or not settings.CTX_DB_PREPARED_STATEMENTS:
        with connection.cursor() as plain:
            yield plain
        return
    # psycopg 3's server-binding cursor, as Django makes it (the stubs don't list it).
    from django.db.backends.postgresql.base import ServerBindingCursor  # type: ignore[attr-defined]

    # What ``connection.cursor()`` does, with the server-binding class in place of the client one.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    connection.validate_thread_sharing()
    psycopg_connection = connection.connection  # this thread's own (Django's connections are per thread)
    with connection.wrap_database_errors:
        raw = ServerBindingCursor(psycopg_connection)
    psycopg_connection.prepare_threshold = 0
    try:
        with connection.make_debug_cursor(raw) if connection.queries_logged else connection.make_cursor(raw) as bound:
            yield bound
    finally:
        psycopg_connection.prepare_threshold = None  # Django's default: nothing else prepared or counted


def any_of(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """``column`` among ``values`` (at least one): ``= ANY(%s)`` with one array parameter on PostgreSQL,
    a statement of one shape however many there are (it can be prepared); an ``IN`` list elsewhere."""
    if connection.vendor == "postgresql":
        return f"{column} = ANY(%s)", [list(values)]
    return f"{column} IN ({', '.join(['%s'] * len(values))})", list(values)


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


def converted(model: type[models.Model], attname: str, value: Any) -> Any:
    """One column's value from the database as the model's attribute holds it (JSON parsed, …)."""
    read = next(read for read in _fields(model, frozenset()) if read.attname == attname)
    for converter in read.converters:
        value = converter(value, read.col, connection)
    return value


def table(model: type[models.Model]) -> str:
    """The model's table name, quoted for this database."""
    return connection.ops.quote_name(model._meta.db_table)


def update(instance: models.Model, fields: Sequence[str]) -> None:
    """``instance.save(update_fields=fields)`` (``auto_now`` fields set as ``save`` sets them), with
    the UPDATE written once per model and set of fields. No signals: the models read here send none."""
    model = type(instance)
    if update_if(model, instance.pk, _saved_values(instance, fields), {}) != 1:  # as ``save`` does: the row is gone
        raise DatabaseError(f"{model.__name__} {instance.pk} was not updated: no such row.")


def update_statement(instance: models.Model, fields: Sequence[str]) -> Statement:
    """``update``'s statement, to be sent with others (``rows_with``); its row must be there (locked)."""
    values = _saved_values(instance, fields)
    sql, written, _ = _update_if_sql(type(instance), tuple(values), ())
    return Statement(sql, [*(field.get_db_prep_save(values[field.name], connection) for field in written), instance.pk])


def _saved_values(instance: models.Model, fields: Sequence[str]) -> dict[str, Any]:
    model = type(instance)
    return {name: model._meta.get_field(name).pre_save(instance, False) for name in fields}  # type: ignore[union-attr]


def update_if(model: type[models.Model], pk: Any, values: dict[str, Any], unchanged: dict[str, Any]) -> int:
    """``model.objects.filter(pk=pk, **unchanged).update(**values)`` with the statement written once per
    set of names: the row's ``values`` set while each of ``unchanged`` still holds (None matching
    NULL, as the ORM's filter does). How many rows changed (0 or 1)."""
    sql, written, kept = _update_if_sql(model, tuple(values), tuple(unchanged))
    params = [field.get_db_prep_save(values[field.name], connection) for field in written]
    params += [pk, *(field.get_db_prep_save(unchanged[field.name], connection) for field in kept)]
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


@cache
def _update_if_sql(
    model: type[models.Model], values: tuple[str, ...], unchanged: tuple[str, ...]
) -> tuple[str, tuple[Any, ...], tuple[Any, ...]]:
    qn = connection.ops.quote_name
    same = "IS NOT DISTINCT FROM" if connection.vendor == "postgresql" else "IS"  # equal, NULL to NULL too
    written = tuple(model._meta.get_field(name) for name in values)
    kept = tuple(model._meta.get_field(name) for name in unchanged)
    assignments = ", ".join(f"{qn(str(field.column))} = %s" for field in written)  # type: ignore[union-attr]
    conditions = "".join(f" AND {qn(str(field.column))} {same} %s" for field in kept)  # type: ignore[union-attr]
    pk = qn(str(model._meta.pk.column))
    return f"UPDATE {table(model)} SET {assignments} WHERE {pk} = %s{conditions}", written, kept


def insert_new(
    instance: models.Model,
    unique: str,
    computed: Computed | None = None,
    then: Callable[[str], Statement] | None = None,
) -> bool:
    """Insert ``instance`` unless a row with its ``unique`` field's value is stored already (then
    nothing is written): True, and the instance's primary key set, when it was inserted. One
    statement (``INSERT … ON CONFLICT DO NOTHING RETURNING``) where ``get_or_create`` sends four.
    ``computed``: one field's value worked out by the statement itself (a subquery, read as the
    statement starts), set on the instance from what the statement returns. ``then`` (PostgreSQL
    only): a write that reads the inserted row (its key, then ``computed``'s column) from the ``WITH``
    query it is given the name of, sent in the same statement; it sees no row when none was inserted."""
    model = type(instance)
    fields = _inserted_fields(model)
    params = [field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields]
    worked_out = None
    if computed is not None:
        at = [field.attname for field in fields].index(computed.field)
        worked_out = (at, computed.sql)
        params[at : at + 1] = computed.params
    sql = _insert_sql(model, 1, unique, worked_out)
    if then is not None:
        assert connection.vendor == "postgresql", "a write reading an INSERT's rows is PostgreSQL's"
        after = then("inserted")
        sql, params = f"WITH inserted AS ({sql}), after AS ({after.sql}) SELECT * FROM inserted", params + after.params
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return False
    instance.pk = row[0]
    if computed is not None:
        setattr(instance, computed.field, row[1])
    instance._state.adding, instance._state.db = False, connection.alias
    return True


class Computed(NamedTuple):
    """A column an ``INSERT`` works out itself: the field's attribute name, an SQL expression, its parameters."""

    field: str
    sql: str
    params: Sequence[Any]


@cache
def _inserted_fields(model: type[models.Model]) -> tuple[Any, ...]:
    return tuple(f for f in model._meta.concrete_fields if not f.primary_key and not getattr(f, "generated", False))


ROWS_PER_INSERT = 500  # (Postgres takes 65,535 parameters to a statement, SQLite 32,766)
MAX_PARAMETERS = 65_535


def insert_rows(instances: Sequence[models.Model], before: Sequence[Statement] = ()) -> None:
    """``bulk_create(instances)`` (all of one model) with the statement written once per row count: a
    multi-row ``INSERT … RETURNING`` that sets each instance's primary key, in order. ``before``:
    statements whose results nobody reads, sent with the first rows (``rows_with``)."""
    if not instances:
        rows_with(None, before)
        return
    for start in range(0, len(instances), ROWS_PER_INSERT):
        chunk = instances[start : start + ROWS_PER_INSERT]
        keys = [found[0] for found in rows_with(insert_statement(chunk), before)]
        before = ()
        for row, key in zip(chunk, keys, strict=True):
            row.pk = key
            row._state.adding, row._state.db = False, connection.alias


def insert_statements(instances: Sequence[models.Model]) -> list[Statement]:
    """``insert_rows``' statements, ``ROWS_PER_INSERT`` rows each, to be sent with others (their keys unread)."""
    return [insert_statement(instances[at : at + ROWS_PER_INSERT]) for at in range(0, len(instances), ROWS_PER_INSERT)]


def insert_statement(instances: Sequence[models.Model]) -> Statement:
    """``insert_rows``' statement for at most ``ROWS_PER_INSERT`` rows of one model."""
    model = type(instances[0])
    fields = _inserted_fields(model)
    params = [field.get_db_prep_save(field.pre_save(row, True), connection) for row in instances for field in fields]
    return Statement(_insert_sql(model, len(instances)), params)


class Statement(NamedTuple):
    sql: str
    params: list[Any]


def rows_with(main: Statement | None, before: Sequence[Statement]) -> list[tuple[Any, ...]]:
    """``main``'s rows (none without it), the statements ``before`` it (writes whose results nobody
    reads) run first. On PostgreSQL in one round trip: each of ``before`` is a data-modifying ``WITH``
    query of ``main``, run to completion on the statement's one snapshot, so none may write a row
    another of them writes or read what another wrote. Elsewhere one by one, in order."""
    if main is None:
        if not before:
            return []
        *before, main = before
    together = sum(len(statement.params) for statement in (*before, main))
    if connection.vendor != "postgresql" or not before or together > MAX_PARAMETERS:
        with prepared_cursor() as cursor:
            for statement in before:
                cursor.execute(statement.sql, statement.params)
            cursor.execute(main.sql, main.params)
            return list(cursor.fetchall()) if cursor.description is not None else []
    sql = "WITH " + ", ".join(f"w{n} AS ({s.sql})" for n, s in enumerate(before)) + " " + main.sql
    params = [value for statement in (*before, main) for value in statement.params]
    with prepared_cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall()) if cursor.description is not None else []


@cache
def _insert_sql(
    model: type[models.Model], count: int, unique: str = "", worked_out: tuple[int, str] | None = None
) -> str:
    """``count`` rows inserted, their primary keys returned; with ``unique``, a row whose value of that
    field is stored already is not (and returns nothing); with ``worked_out`` (a field's index among
    the inserted ones, an SQL expression), that value is the expression's, returned after the key."""
    qn = connection.ops.quote_name
    fields = _inserted_fields(model)
    columns = ", ".join(qn(str(f.column)) for f in fields)
    values = ["%s"] * len(fields)
    returned = [qn(str(model._meta.pk.column))]
    if worked_out is not None:
        at, expression = worked_out
        values[at] = f"({expression})"
        returned.append(qn(str(fields[at].column)))
    row = "(" + ", ".join(values) + ")"
    conflict = f" ON CONFLICT ({qn(str(model._meta.get_field(unique).column))}) DO NOTHING" if unique else ""  # type: ignore[union-attr]
    rows = ", ".join([row] * count)
    return f"INSERT INTO {table(model)} ({columns}) VALUES {rows}{conflict} RETURNING {', '.join(returned)}"
