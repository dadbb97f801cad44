"""Full-text search over everything a session ever held (docs/SEARCH.md): its messages in every state
(active, compacted, summarized, archived), the originals a compaction replaced (kept for revert), its
checkpoints and its handoff documents; scoped to the user's projects like every read.

On PostgreSQL: the ``search`` columns and expression indexes of migration 0039, ``websearch_to_tsquery``
(quotes, ``or``, ``-word``), ``ts_rank`` and ``ts_headline``. On SQLite (the embedded default): every
word of the query in the JSON text, newest first, ranked by how often the words occur."""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.db import connection
from django.db.models import Q, QuerySet

from compaction.search_text import mark_terms, search_text
from sessions_app.errors import InvalidInput
from sessions_app.models import AgentSession, Checkpoint, HandoffDocument, Message, MessageBackup, MessageState
from sessions_app.selectors.access import _my_project_ids, as_pk, storable

if TYPE_CHECKING:
    from django.contrib.auth.models import User

KINDS = ("message", "original", "checkpoint", "handoff")
STATES = tuple(MessageState.values)
MAX_QUERY = 500
MAX_PAGE = 100
# ts_headline's marks: characters no stored text holds, made ``<mark>`` after the snippet is escaped.
_START, _STOP = "\x02", "\x03"
_HEADLINE = f"StartSel={_START},StopSel={_STOP},MaxFragments=2,MaxWords=18,MinWords=6,FragmentDelimiter= … "
CANDIDATES = 2_000  # the newest matching rows of each kind that are ranked
MAX_TEXT = 200_000


@dataclass(frozen=True)
class Hit:
    kind: str  # message | original (what a compaction replaced) | checkpoint | handoff
    session_id: int
    session_name: str
    project_id: int
    message_id: int | None
    seq: int | None  # the message's; a checkpoint's version
    state: str  # the message's state now; "" for a checkpoint or handoff
    role: str
    snippet: str  # HTML: the text escaped, the matched words in <mark>
    rank: float
    created_at: datetime
    ref: str  # what the agent recalls it by (``recall``): m<seq>, c<version>, h<handoff id>


@dataclass(frozen=True)
class Scope:
    """What to search: the user's projects (every project for None: an operator's ``ctx search``),
    narrowed to one project, one session, a role, a state."""

    user: User | None
    project: Any = None
    session: Any = None
    role: str | None = None
    state: str | None = None


def search(scope: Scope, query: str, *, offset: int = 0, limit: int = 20) -> list[Hit]:
    """Up to ``limit`` hits after ``offset``, best first; ``InvalidInput`` for an empty or overlong
    query, an unknown state."""
    query = query.strip()
    if not query:
        raise InvalidInput("Say what to search for (q).", code="query_required")
    if len(query) > MAX_QUERY or not storable(query):
        raise InvalidInput(
            f"A search is at most {MAX_QUERY} characters, without NUL or a lone surrogate.", code="query_invalid"
        )
    if scope.state and scope.state not in STATES:
        raise InvalidInput(f"state must be one of {', '.join(STATES)}.", code="state_invalid")
    sessions = _sessions(scope)
    if sessions is None:
        return []
    limit = max(1, min(limit, MAX_PAGE + 1))  # a page and one more: whether there is a next
    if connection.vendor == "postgresql":
        return _postgres(sessions, scope, query, offset, limit)
    return _sqlite(sessions, scope, query, offset, limit)


def _sessions(scope: Scope) -> QuerySet[AgentSession, Any] | None:
    """The ids of the sessions searched; None when the scope names nothing."""
    everyone = AgentSession.objects.all()
    qs = everyone if scope.user is None else everyone.filter(project_id__in=_my_project_ids(scope.user))
    if scope.project not in (None, ""):
        pid = as_pk(scope.project)
        if pid is None:
            return None
        qs = qs.filter(project_id=pid)
    if scope.session not in (None, ""):
        ref = str(scope.session)
        if not storable(ref):
            return None
        sid = as_pk(ref)
        qs = qs.filter(pk=sid) if sid is not None else qs.filter(external_id=ref)
    return qs.order_by().values("pk")  # unordered: an ORDER BY in the subquery keeps the planner off the best plans


def _filters(scope: Scope, alias: str, sessions_sql: str) -> tuple[str, list[Any]]:
    """The conditions on ``alias``'s rows: their session (``sessions_sql``: ``IN (…)`` or ``= ANY(…)``)
    and the scope's role and state."""
    where = [f"{alias}.session_id {sessions_sql}"]
    params: list[Any] = []
    if scope.role:
        where.append(f"{alias}.role = %s")
        params.append(scope.role)
    if scope.state:
        where.append(f"{alias}.state = %s")
        params.append(scope.state)
    return " AND ".join(where), params


def _postgres(sessions: QuerySet[AgentSession, Any], scope: Scope, query: str, offset: int, limit: int) -> list[Hit]:
    with connection.cursor() as cursor:
        # The query's words as a constant: the planner estimates from the words' statistics how many
        # rows hold them (a tsquery computed in the statement itself it can only guess at).
        cursor.execute("SELECT websearch_to_tsquery('english'::regconfig, %s)::text", [query])
        words = cursor.fetchone()[0]
    if not words:  # only stop words ("the", "of")
        return []
    if scope.session not in (None, ""):
        # A session's search names its session by id: the planner then weighs the session's rows (its
        # index) against the word's matches (the GIN index) by their statistics, and reads the fewer.
        ids = list(sessions.values_list("pk", flat=True))
        if not ids:
            return []
        sessions_params: list[Any] = list(ids) if len(ids) == 1 else [ids]
        sessions_sql = "= %s" if len(ids) == 1 else "= ANY(%s::bigint[])"
        # One session: its newest messages first from its (session, seq) index, stopping at CANDIDATES.
        newest = "m.seq DESC" if len(ids) == 1 else "m.id DESC"
        # Its originals by its compactions (the backups' own index), not every original holding the words.
        backups_of_sessions = (
            "AND b.compaction_id IN (SELECT c.id FROM sessions_app_compaction c WHERE c.session_id = ANY(%s::bigint[]))"
        )
        backup_params: list[Any] = [ids]
    else:
        backups_of_sessions, backup_params, newest = "", [], "m.id DESC"
        sql_of_sessions, params_of_sessions = sessions.query.sql_with_params()
        sessions_sql, sessions_params = f"IN ({sql_of_sessions})", list(params_of_sessions)
    message_where, message_params = _filters(scope, "m", sessions_sql)
    # Each kind's newest matches, at most CANDIDATES, are ranked: a word in most rows of a project is
    # ranked over its recent history, not over every row that holds it.
    parts = [
        f"""SELECT 'message' AS kind, m.id AS row_id, m.session_id, m.id AS message_id, m.seq, m.state, m.role,
                   ts_rank(m.search, %s::tsquery) AS rank, m.created_at
            FROM (SELECT m.id, m.session_id, m.seq, m.state, m.role, m.search, m.created_at
                  FROM sessions_app_message m WHERE m.search @@ %s::tsquery AND {message_where}
                  ORDER BY {newest} LIMIT {CANDIDATES}) m""",
        f"""SELECT 'original', b.id, b.session_id, b.message_id, b.seq, b.state, b.role, ts_rank(b.search, %s::tsquery),
                   b.created_at
            FROM (SELECT b.id, m.session_id, b.message_id, m.seq, m.state, m.role, b.search, b.created_at
                  FROM sessions_app_messagebackup b JOIN sessions_app_message m ON m.id = b.message_id
                  WHERE b.search @@ %s::tsquery AND {message_where} {backups_of_sessions}
                  ORDER BY b.id DESC LIMIT {CANDIDATES}) b""",
    ]
    params: list[Any] = [words, words, *sessions_params, *message_params]
    params += [words, words, *sessions_params, *message_params, *backup_params]
    if not scope.role and not scope.state:  # documents have neither
        parts += [
            f"""SELECT 'checkpoint', c.id, c.session_id, NULL, c.version, '', '',
                       ts_rank(to_tsvector('english'::regconfig, ctx_search_text(c.data)), %s::tsquery), c.created_at
                FROM sessions_app_checkpoint c
                WHERE to_tsvector('english'::regconfig, ctx_search_text(c.data)) @@ %s::tsquery
                  AND c.session_id {sessions_sql}""",
            f"""SELECT 'handoff', h.id, h.session_id, NULL, NULL, '', '',
                       ts_rank(to_tsvector('english'::regconfig, left(h.text, 200000)), %s::tsquery), h.created_at
                FROM sessions_app_handoffdocument h
                WHERE to_tsvector('english'::regconfig, left(h.text, 200000)) @@ %s::tsquery
                  AND h.session_id {sessions_sql}""",
        ]
        params += [words, words, *sessions_params] * 2
    sql = (
        " UNION ALL ".join(f"({part})" for part in parts)
        + " ORDER BY rank DESC, created_at DESC, row_id DESC LIMIT %s OFFSET %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*params, limit, max(0, offset)])
        rows = cursor.fetchall()
    lexemes = [lexeme.replace("''", "'") for lexeme in _LEXEME.findall(words)]
    return _hits(rows, query, lambda texts, q: _pg_headlines([_around(t, lexemes) for t in texts], q))


_LEXEME = re.compile(r"'((?:[^']|'')+)'")
_AROUND = 4_000


def _around(text: str, lexemes: list[str]) -> str:
    """The part of ``text`` around the first of the query's words, for its snippet: ts_headline reads
    all it is given, and a long tool output's snippet needs only where the words are. A word's lexeme
    is its stem (``branch`` for ``branches``), which its forms in the text begin with; where none is
    found (a stem the text spells otherwise), the whole text."""
    if len(text) <= 2 * _AROUND:
        return text
    low = text.lower()
    found = [at for at in (low.find(lexeme) for lexeme in lexemes) if at >= 0]
    if not found:
        return text
    first = min(found)
    return text[max(0, first - _AROUND) : first + _AROUND]


def _pg_headlines(texts: list[str], query: str) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT ts_headline('english'::regconfig, t, websearch_to_tsquery('english'::regconfig, %s), %s) "
            "FROM unnest(%s::text[]) WITH ORDINALITY AS texts(t, n) ORDER BY n",
            [query, _HEADLINE, texts],
        )
        return [_marked(row[0]) for row in cursor.fetchall()]


def _hits(rows: list[tuple[Any, ...]], query: str, headlines: Any) -> list[Hit]:
    """The rows as hits, each with its snippet (one query for the page's snippets) and session."""
    texts = _texts(rows)
    snippets = headlines([texts[kind, row_id] for kind, row_id, *_ in rows], query) if rows else []
    sessions = {
        pk: (name, project_id)
        for pk, name, project_id in AgentSession.objects.filter(pk__in={row[2] for row in rows}).values_list(
            "pk", "name", "project_id"
        )
    }
    hits = []
    for (kind, row_id, session_id, message_id, seq, state, role, rank, created_at), snippet in zip(
        rows, snippets, strict=True
    ):
        name, project_id = sessions.get(session_id, ("", 0))
        hits.append(
            Hit(
                kind=kind,
                session_id=session_id,
                session_name=name,
                project_id=project_id,
                message_id=message_id,
                seq=seq,
                state=state,
                role=role,
                snippet=snippet,
                rank=round(float(rank), 6),
                created_at=created_at,  # a datetime from either database
                ref=_ref(kind, row_id, seq),
            )
        )
    return hits


def _texts(rows: list[tuple[Any, ...]]) -> dict[tuple[str, int], str]:
    """The searched text of each row, a query per kind."""
    ids: dict[str, set[int]] = {}
    for kind, row_id, *_ in rows:
        ids.setdefault(kind, set()).add(row_id)
    found: dict[tuple[str, int], str] = {}
    sources = {"message": (Message, "content"), "original": (MessageBackup, "content"),
               "checkpoint": (Checkpoint, "data"), "handoff": (HandoffDocument, "text")}  # fmt: skip
    for kind, pks in ids.items():
        model, field = sources[kind]
        for pk, value in model.objects.filter(pk__in=pks).values_list("pk", field):  # type: ignore[attr-defined]
            found[kind, pk] = value[:MAX_TEXT] if isinstance(value, str) else search_text(value)
    return found


def hit_path(hit: Hit, query: str) -> str:
    """The page that shows a hit, with the query to highlight."""
    q = urlencode({"q": query})
    if hit.kind == "message":
        return f"/messages/{hit.message_id}/?{q}"
    if hit.kind == "original":
        return f"/messages/{hit.message_id}/original/?{q}"
    return f"/sessions/{hit.session_id}/#{'checkpoints' if hit.kind == 'checkpoint' else 'handoffs'}"


def _ref(kind: str, row_id: int, seq: int | None) -> str:
    if kind in ("message", "original"):
        return f"m{seq}"
    return f"c{seq}" if kind == "checkpoint" else f"h{row_id}"


def _marked(headline: str) -> str:
    return html.escape(headline).replace(_START, "<mark>").replace(_STOP, "</mark>")


# The SQLite fallback: words (or quoted phrases) of the query, each in the JSON text of a row.
_TERM = re.compile(r'"([^"]+)"|(\S+)')


def query_terms(query: str) -> list[str]:
    """A query's words and quoted phrases (what a page highlights; SQLite's search looks for)."""
    terms = [(a or b).strip() for a, b in _TERM.findall(query)]
    return [t for t in terms if t and not t.startswith("-") and t.lower() != "or"][:10]


def _sqlite(session_ids: QuerySet[AgentSession, Any], scope: Scope, query: str, offset: int, limit: int) -> list[Hit]:
    terms = query_terms(query)
    if not terms:
        return []
    # JSON text escapes what isn't ASCII: a word is looked for as the JSON text would hold it.
    as_json = [json.dumps(t)[1:-1] for t in terms]
    rows: list[tuple[Any, ...]] = []
    message_filter = Q(session_id__in=session_ids)
    if scope.role:
        message_filter &= Q(role=scope.role)
    if scope.state:
        message_filter &= Q(state=scope.state)
    messages = Message.objects.filter(message_filter)
    backups = MessageBackup.objects.filter(message__in=messages)
    for term in as_json:
        messages = messages.filter(content__icontains=term)
        backups = backups.filter(content__icontains=term)
    for m in messages.order_by("-id").values_list("id", "session_id", "seq", "state", "role", "created_at", "content")[
        :CANDIDATES
    ]:
        rows.append(("message", m[0], m[1], m[0], m[2], m[3], m[4], _count(m[6], terms), m[5]))
    for b in backups.order_by("-id").values_list(
        "id", "message__session_id", "message_id", "message__seq", "message__state", "message__role", "created_at",
        "content",
    )[:CANDIDATES]:  # fmt: skip
        rows.append(("original", b[0], b[1], b[2], b[3], b[4], b[5], _count(b[7], terms), b[6]))
    if not scope.role and not scope.state:
        checkpoints = Checkpoint.objects.filter(session_id__in=session_ids)
        handoffs = HandoffDocument.objects.filter(session_id__in=session_ids)
        for term, plain in zip(as_json, terms, strict=True):
            checkpoints = checkpoints.filter(data__icontains=term)
            handoffs = handoffs.filter(text__icontains=plain)
        for c in checkpoints.values_list("id", "session_id", "version", "created_at", "data")[:CANDIDATES]:
            rows.append(("checkpoint", c[0], c[1], None, c[2], "", "", _count(c[4], terms), c[3]))
        for h in handoffs.values_list("id", "session_id", "created_at", "text")[:CANDIDATES]:
            rows.append(("handoff", h[0], h[1], None, None, "", "", _count(h[3], terms), h[2]))
    rows.sort(key=lambda r: (-r[7], -r[8].timestamp(), -r[1]))
    return _hits(rows[offset : offset + limit], query, lambda texts, _: [_snippet(t, terms) for t in texts])


def _count(value: Any, terms: list[str]) -> float:
    text = (value if isinstance(value, str) else search_text(value)).lower()
    return float(sum(text.count(t.lower()) for t in terms))


def _snippet(text: str, terms: list[str], width: int = 90) -> str:
    """The text around the first term found, escaped, each term in ``<mark>``."""
    low = text.lower()
    first = min((i for i in (low.find(t.lower()) for t in terms) if i >= 0), default=0)
    start = max(0, first - width)
    piece = mark_terms(text[start : first + width * 2], terms)
    return ("… " if start else "") + piece + (" …" if first + width * 2 < len(text) else "")
