"""Sessions read with their project and the project's policy in one statement written once
(``sql_rows``): the lookups every API request and proxied exchange makes."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any, NamedTuple

from sessions_app.models import AgentSession, Budget, CompactionPolicy, Membership, Message, Project
from sessions_app.selectors import sql_rows
from sessions_app.selectors.budgets import BUDGETED

# Not read on every request: an agent such as Claude Code sends tens of kB of tool definitions (they
# are read, on first use, when a context is built).
LONG_TEXTS = frozenset({"system_prompt", "tools"})


def sessions_where(
    where: str, params: Sequence[Any], *, limit: int, member: int | None = None, leave_out: frozenset[str] = frozenset()
) -> list[tuple[AgentSession, str | None]]:
    """The sessions ``where`` names (``s.`` is the session; at most ``limit``), each with its project
    and policy attached and, with ``member`` (a user's id), only those in that user's projects with
    the user's role there (else None)."""
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(
            _sql(where, limit, member is not None, leave_out), [*([member] if member is not None else []), *params]
        )
        return [_row(row, leave_out) for row in cursor.fetchall()]


def session_where(where: str, params: Sequence[Any]) -> AgentSession | None:
    """The one session ``where`` names, its long texts deferred (``LONG_TEXTS``); None if there is none."""
    found = sessions_where(where, params, limit=1, leave_out=LONG_TEXTS)
    return found[0][0] if found else None


class Ends(NamedTuple):
    """A session's last two messages as it was read: their client ids and contents by seq."""

    last_seq: int
    found: dict[int, tuple[str | None, Any]]

    def covering(self, session: AgentSession, seqs: Sequence[int]) -> dict[int, tuple[str | None, Any]] | None:
        """The stored messages at ``seqs`` (those of them stored), when these are of ``session`` as it
        still ends and among its last two; else None (read them)."""
        if session.last_seq != self.last_seq or not all(self.last_seq - 1 <= seq <= self.last_seq for seq in seqs):
            return None
        return {seq: self.found[seq] for seq in seqs if seq in self.found}


def session_and_ends(session_id: int) -> tuple[AgentSession, Ends] | None:
    """``session_where`` by id, and the session's last two messages (``Ends``) in the same statement:
    where a proxied request's history meets the stored one, on every exchange."""
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(_sql("s.id = %s", 1, False, LONG_TEXTS, ends=True), [session_id])
        row = cursor.fetchone()
    if row is None:
        return None
    session, _ = _row(row, LONG_TEXTS)
    found = {
        seq: (client_id, sql_rows.converted(Message, "content", content))
        for seq, client_id, content in (row[-6:-3], row[-3:])
        if seq is not None
    }
    return session, Ends(session.last_seq, found)


@cache
def _sql(where: str, limit: int, scoped: bool, leave_out: frozenset[str], ends: bool = False) -> str:
    role, member = ("m.role", f" JOIN {sql_rows.table(Membership)} m ON m.project_id = s.project_id AND m.user_id = %s")
    if not scoped:
        role, member = "NULL", ""
    last_two, their_rows = "", ""
    if ends:  # (the message table's unique (session, seq) index finds each)
        last_two = ", e1.seq, e1.client_id, e1.content, e2.seq, e2.client_id, e2.content"
        their_rows = "".join(
            f" LEFT JOIN {sql_rows.table(Message)} {e} ON {e}.session_id = s.id AND {e}.seq = s.last_seq{minus}"
            for e, minus in (("e1", " - 1"), ("e2", ""))
        )
    return (
        f"SELECT {role}, {sql_rows.select_list(AgentSession, 's', leave_out)}, {sql_rows.select_list(Project, 'p')},"
        f" {sql_rows.select_list(CompactionPolicy, 'c')}, {budgeted('s.project_id')}{last_two}"
        f" FROM {sql_rows.table(AgentSession)} s"
        f" JOIN {sql_rows.table(Project)} p ON p.id = s.project_id{member}"
        f" LEFT JOIN {sql_rows.table(CompactionPolicy)} c ON c.project_id = s.project_id{their_rows}"
        f" WHERE {where} LIMIT {limit}"
    )


def budgeted(project_id: str) -> str:
    """Whether the project ``project_id`` (a column) has a budget, beside its row (``BUDGETED``): one
    index probe in the statement instead of a cache round trip after it."""
    return f"EXISTS (SELECT 1 FROM {sql_rows.table(Budget)} b WHERE b.project_id = {project_id})"


def _row(row: Sequence[Any], leave_out: frozenset[str]) -> tuple[AgentSession, str | None]:
    """A row of ``_sql``: the session, its project and policy attached, and the role."""
    at = 1
    parts = []
    for model, left in ((AgentSession, leave_out), (Project, frozenset()), (CompactionPolicy, frozenset())):
        width = sql_rows.width(model, left)
        parts.append(row[at : at + width])
        at += width
    session, project = sql_rows.instance(AgentSession, parts[0], leave_out), sql_rows.instance(Project, parts[1])
    setattr(project, BUDGETED, row[at])
    policy = sql_rows.instance(CompactionPolicy, parts[2]) if parts[2][0] is not None else None
    session.project = project
    Project.policy.related.set_cached_value(project, policy)  # the reverse one-to-one
    if policy is not None:
        policy.project = project
    return session, row[0]
