"""Lookups scoped to what the asking user may see: anything outside their projects is ``NotFound``
(404, never 403), a role too low for the action ``Forbidden``. Operators' lookups (``session_find``,
``project_find_or_none``) see every project and are for the ``ctx`` command only."""

from __future__ import annotations

import re
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet

from compaction.numbers import whole_number
from sessions_app.errors import Forbidden, InvalidInput, NotFound
from sessions_app.models import (
    ROLE_RANK,
    AgentSession,
    ApiKey,
    Budget,
    Checkpoint,
    Compaction,
    HandoffDocument,
    Membership,
    Message,
    Project,
    ProviderRequest,
    Role,
    Webhook,
)
from sessions_app.selectors import session_rows, sql_rows
from sessions_app.selectors.budgets import BUDGETED

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

# What hangs off a session and is looked up by its own id, scoped like its session.
_SessionRow = TypeVar("_SessionRow", Compaction, Checkpoint, HandoffDocument)
_Row = TypeVar("_Row")


def as_pk(ref: Any) -> int | None:
    """A reference that is a primary key: ASCII digits within a bigint, else None."""
    pk = whole_number(str(ref), max_digits=19)
    return pk if pk is not None and pk < 2**63 else None


def storable(*values: Any) -> bool:
    """Whether these strings could match stored text: PostgreSQL refuses U+0000 in a query's text (as
    it refuses to store it), and no database's driver encodes a lone surrogate, so a value holding
    either matches nothing (a query with it would be a 500)."""
    return not any(isinstance(v, str) and ("\x00" in v or _SURROGATE.search(v)) for v in values)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _my_project_ids(user: User) -> QuerySet[Membership, Any]:
    return Membership.objects.filter(user=user).values("project_id")


def project_list_for(user: User) -> QuerySet[Project]:
    # A subquery, not a join: one membership per project and user, so there is nothing to DISTINCT.
    return Project.objects.filter(pk__in=_my_project_ids(user))


def role_in(user: User, project_id: int) -> Role | None:
    if not user.is_authenticated:
        return None
    role = Membership.objects.filter(project_id=project_id, user=user).values_list("role", flat=True).first()
    return Role(role) if role else None


def _require(row: _Row | None, role: Role | None, min_role: Role, what: str) -> _Row:
    """``row``, if there is one and the user's ``role`` in its project is at least ``min_role``."""
    if row is None or role is None:
        raise NotFound(f"{what} not found.")
    if ROLE_RANK[role] < ROLE_RANK[min_role]:
        raise Forbidden(f"Your role in this project ({role.value}) can't do this; it needs {min_role.value}.")
    return row


def project_get_for(user: User, project_id: Any, *, min_role: Role = Role.VIEWER) -> Project:
    pid = as_pk(project_id)
    if not pid:
        raise NotFound("Project not found.")
    project = Project.objects.filter(pk=pid).first()
    return _require(project, role_in(user, pid) if project else None, min_role, "Project")


def project_find_for(user: User, ref: str | None, *, min_role: Role = Role.VIEWER) -> Project:
    """The project ``ref`` names among the user's (an id or a name), else (``ref`` None) the user's
    only project, where the user's role is at least ``min_role``; in one query (the proxy asks on
    every request of an agent). ``InvalidInput`` (code ``project_required``) when ``ref`` is None and
    the user has no project or several."""
    where, params = "", list[Any]()  # the whole list when no ``ref``
    if ref is not None:
        pk = as_pk(ref)
        if pk is None and not storable(ref):
            raise NotFound(f"No project named {ref!r} among yours.")
        named: list[Any] = [pk] if pk is not None else [ref]
        where, params = (" AND p.id = %s" if pk is not None else " AND p.name = %s"), named
    found = _my_projects(user.pk, where, params)
    if ref is None and len(found) != 1:
        raise InvalidInput(
            "Say which project to record in with the ctxweb-project header (its id or name): "
            + ("you are a member of several." if found else "you are a member of none."),
            code="project_required",
        )
    if not found:
        raise NotFound("Project not found." if as_pk(ref) is not None else f"No project named {ref!r} among yours.")
    if len(found) > 1:
        raise NotFound(f"Several of your projects are named {ref!r}; use the id.")
    return _require(found[0][0], Role(found[0][1]), min_role, "Project")


def _my_projects(user_id: int, where: str, params: list[Any]) -> list[tuple[Project, str]]:
    """The user's projects that ``where`` names (the first two by id), each with the user's role: SQL
    written once (``sql_rows``), as the proxy asks on every request."""
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(_my_projects_sql(where), [user_id, *params])
        found = []
        for row in cursor.fetchall():
            project = sql_rows.instance(Project, row[2:])
            setattr(project, BUDGETED, row[1])
            found.append((project, row[0]))
        return found


@cache
def _my_projects_sql(where: str) -> str:
    return (
        f"SELECT m.role, {session_rows.budgeted('p.id')}, {sql_rows.select_list(Project, 'p')}"
        f" FROM {sql_rows.table(Membership)} m"
        f" JOIN {sql_rows.table(Project)} p ON p.id = m.project_id"
        f" WHERE m.user_id = %s{where} ORDER BY m.project_id LIMIT 2"
    )


def session_list_for(
    user: User,
    *,
    project: Any = None,
    status: str | None = None,
    q: str | None = None,
    model: str | None = None,
    owner: int | None = None,
    key: int | None = None,
) -> QuerySet[AgentSession]:
    """The user's sessions, filtered by project, status, a text in the name, external id or model
    (``q``), a text in the model alone (``model``), their owner's user id (``owner``), or an API key
    id that made a provider request in them (``key``)."""
    # The projects as a subquery: joining the memberships needed a DISTINCT over every column of the
    # session (system prompt and tools included), 22 ms instead of 0.8 ms for a count at 2,000 sessions.
    qs = AgentSession.objects.filter(project_id__in=_my_project_ids(user)).select_related("project", "project__policy")
    if project not in (None, ""):
        pid = as_pk(project)
        if pid is None:
            return qs.none()
        qs = qs.filter(project_id=pid)
    if not storable(status, q, model):
        return qs.none()
    if model:
        qs = qs.filter(model__icontains=model)
    if owner is not None:
        qs = qs.filter(owner_id=owner)
    if key is not None:
        qs = qs.filter(pk__in=ProviderRequest.objects.filter(api_key_id=key).values("session_id"))
    if status:
        qs = qs.filter(status=status)
    if q:
        qs = qs.filter(Q(name__icontains=q) | Q(external_id__icontains=q) | Q(model__icontains=q))
    return qs


def project_find_or_none(ref: str, *, user: User) -> Project | None:
    """For operators (``manage.py ctx``), who see every project: a project by id, whoever's it is, or
    by name among ``user``'s projects; None when there is none."""
    pk = as_pk(ref)
    if pk is not None:
        return Project.objects.filter(pk=pk).first()
    return project_list_for(user).filter(name=ref).first() if storable(ref) else None


def _sessions_by_ref(qs: QuerySet[AgentSession], ref: str) -> list[AgentSession]:
    """What ``ref`` names among ``qs``: the session with that id; else those (at most two, enough to
    tell one from several) whose external id it is: the agent's own session id."""
    pk = as_pk(ref)
    # (No ORDER BY for a lookup by id: the list's default ordering cost 0.2 ms of ORM work per request.)
    found = next(iter(qs.filter(pk=pk).order_by()[:1]), None) if pk is not None else None
    if found is not None:
        return [found]
    return list(qs.filter(external_id=ref)[:2]) if ref and storable(ref) else []


def session_find(session_ref: Any) -> AgentSession:
    """Any session, by id or by an external id no other session has: for operators (``manage.py ctx``),
    who see every project. Users go through ``session_get_for``."""
    ref = str(session_ref)
    matches = _sessions_by_ref(AgentSession.objects.select_related("project", "project__policy"), ref)
    if len(matches) > 1:
        raise NotFound(f"Several sessions have external id {ref!r}; use the numeric id.")
    if not matches:
        raise NotFound(f"No session {ref!r}.")
    return matches[0]


def session_get_for(user: User, session_ref: Any, *, min_role: Role = Role.VIEWER) -> AgentSession:
    """A session by id (or, for strings that aren't ids, by external id) that the user may see, with
    its project and the project's policy loaded."""
    # One statement, written once (``sql_rows``): every API request and proxied exchange makes it, and
    # the ORM's compiling and object building cost several times the query. The user's role comes
    # from the membership join that scopes it.
    ref = str(session_ref)
    pk = as_pk(ref)
    found: list[tuple[AgentSession, Role]] = []
    if user.is_authenticated:
        if pk is not None:
            found = _sessions_of(user.pk, "s.id = %s", pk, 1)
        if not found and ref and storable(ref):
            found = _sessions_of(user.pk, "s.external_id = %s", ref, 2)
    session, role = found[0] if len(found) == 1 else (None, None)
    return _require(session, role, min_role, "Session")


def _sessions_of(user_id: int, where: str, value: Any, limit: int) -> list[tuple[AgentSession, Role]]:
    """The user's sessions that ``where`` names (at most ``limit``), each with the user's role."""
    found = session_rows.sessions_where(where, [value], limit=limit, member=user_id)
    return [(session, Role(str(role))) for session, role in found]


def _owned(model: type[_SessionRow], user: User, pk: Any, *, min_role: Role, what: str) -> _SessionRow:
    """A row hanging off a session, scoped like its session: 404 outside the user's projects."""
    key = as_pk(pk)
    row = None if key is None else model.objects.select_related("session", "session__project").filter(pk=key).first()
    return _require(row, role_in(user, row.session.project_id) if row else None, min_role, what)


def compaction_get_for(user: User, pk: Any, *, min_role: Role = Role.VIEWER) -> Compaction:
    return _owned(Compaction, user, pk, min_role=min_role, what="Compaction")


def checkpoint_get_for(user: User, pk: Any) -> Checkpoint:
    return _owned(Checkpoint, user, pk, min_role=Role.VIEWER, what="Checkpoint")


def handoff_get_for(user: User, pk: Any) -> HandoffDocument:
    return _owned(HandoffDocument, user, pk, min_role=Role.VIEWER, what="Handoff")


def message_get_for(user: User, pk: Any) -> Message:
    """A message, scoped like its session (with the session attached, checked)."""
    key = as_pk(pk)
    message = None if key is None else Message.objects.filter(pk=key).first()
    if message is None:
        raise NotFound("Message not found.")
    message.session = session_get_for(user, message.session_id)
    return message


def roles_of(user: User) -> dict[int, str]:
    """The user's role in each of their projects, by project id."""
    return dict(Membership.objects.filter(user=user).values_list("project_id", "role"))


def memberships_of(project: Project) -> QuerySet[Membership]:
    return Membership.objects.filter(project=project).select_related("user").order_by("user__username")


def member_get(project: Project, user_id: Any) -> User:
    """A user who is a member of the project (the caller checked the asker's right to the project)."""
    key = as_pk(user_id)
    user = None if key is None else get_user_model().objects.filter(pk=key, memberships__project=project).first()
    if user is None:
        raise NotFound("Not a member of this project.")
    return user


def apikey_live(prefix: str) -> ApiKey | None:
    """The unrevoked key with this prefix, its user loaded: every API request asks (``sql_rows``)."""
    with sql_rows.prepared_cursor() as cursor:
        cursor.execute(_apikey_sql(), [prefix])
        row = cursor.fetchone()
    if row is None:
        return None
    width = sql_rows.width(ApiKey)
    key = sql_rows.instance(ApiKey, row[:width])
    key.user = sql_rows.instance(get_user_model(), row[width:])
    return key


@cache
def _apikey_sql() -> str:
    users = get_user_model()
    return (
        f"SELECT {sql_rows.select_list(ApiKey, 'k')}, {sql_rows.select_list(users, 'u')}"
        f" FROM {sql_rows.table(ApiKey)} k JOIN {sql_rows.table(users)} u ON u.id = k.user_id"
        " WHERE k.prefix = %s AND k.revoked_at IS NULL"
    )


def apikey_list_for(user: User) -> QuerySet[ApiKey]:
    return ApiKey.objects.filter(user=user).order_by("-created_at")


def apikey_get_for(user: User, pk: Any) -> ApiKey:
    """One of the user's own keys: nobody else's key is visible to them, not even to admins."""
    key = as_pk(pk)
    found = None if key is None else ApiKey.objects.filter(pk=key, user=user).first()
    if found is None:
        raise NotFound("API key not found.")
    return found


def webhook_get_for(user: User, webhook_id: Any, *, min_role: Role = Role.ADMIN) -> Webhook:
    """A webhook of one of the user's projects; its secret makes it the project admins' alone."""
    key = as_pk(webhook_id)
    row = None if key is None else Webhook.objects.select_related("project").filter(pk=key).first()
    return _require(row, role_in(user, row.project_id) if row else None, min_role, "Webhook")


def budget_get_for(user: User, project_id: Any, budget_id: Any, *, min_role: Role = Role.VIEWER) -> Budget:
    """A budget of one of the user's projects, by the project's id and its own."""
    project = project_get_for(user, project_id, min_role=min_role)
    key = as_pk(budget_id)
    found = None if key is None else Budget.objects.select_related("api_key", "project").filter(pk=key).first()
    if found is None or found.project_id != project.pk:
        raise NotFound("Budget not found.")
    return found
