"""The hot lookups written as SQL (``selectors.sql_rows``) answer what the ORM answers: every field of
every row, the related rows attached, deferred fields read on use, and UPDATEs that write what
``save(update_fields=…)`` writes."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from django.db import DatabaseError
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from sessions_app.errors import Forbidden, NotFound
from sessions_app.models import AgentSession, ApiKey, CompactionPolicy, Message, Project, ProviderRequest, Role
from sessions_app.selectors import access, session_rows, sql_rows
from sessions_app.services import ingest
from tests.hypothesis_budget import DATABASE

pytestmark = pytest.mark.django_db


def field_values(row: object) -> dict[str, object]:
    return {f.attname: getattr(row, f.attname) for f in type(row)._meta.concrete_fields}  # type: ignore[attr-defined]


texts = st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=40)
TOOL_NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,20}", fullmatch=True)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)


@DATABASE
@given(
    system=texts,
    tools=st.lists(
        st.builds(
            lambda name, more: {**more, "name": name}, TOOL_NAMES, st.dictionaries(texts, json_values, max_size=3)
        ),
        max_size=3,
        unique_by=lambda tool: tool["name"],
    ),
    name=texts,
)
def test_the_scoped_session_lookup_is_the_orms_row_with_its_project_and_policy(
    team, session_of, django_assert_num_queries, system, tools, name
):
    session = session_of(name=name or "s", system_prompt=system, tools=tools, external_id=f"agent-{uuid.uuid4()}")
    found = access.session_get_for(team.carol.user, session.pk)
    orm = AgentSession.objects.select_related("project", "project__policy").get(pk=session.pk)
    assert field_values(found) == field_values(orm)
    with django_assert_num_queries(0):
        assert field_values(found.project) == field_values(orm.project)
        assert field_values(found.project.policy) == field_values(orm.project.policy)
        assert found.project.policy.project is found.project
    assert field_values(access.session_get_for(team.carol.user, session.external_id)) == field_values(orm)


def test_the_lookup_keeps_its_scope_and_roles(team, session_of):
    session = session_of()
    with pytest.raises(NotFound):
        access.session_get_for(team.mallory.user, session.pk)
    with pytest.raises(Forbidden):
        access.session_get_for(team.carol.user, session.pk, min_role=Role.MEMBER)
    assert access.session_get_for(team.bob.user, str(session.pk), min_role=Role.MEMBER).pk == session.pk


def test_a_project_without_a_policy_reads_as_the_orm_reads_it(team, session_of):
    session = session_of()
    CompactionPolicy.objects.filter(project=team.project).delete()
    found = access.session_get_for(team.alice.user, session.pk)
    with pytest.raises(Project.policy.RelatedObjectDoesNotExist):
        found.project.policy  # noqa: B018  # the ORM's answer for a project with none


def test_the_api_key_lookup_is_the_orms_row_and_user(team):
    key = ApiKey.objects.get(user=team.alice.user)
    found = access.apikey_live(key.prefix)
    assert found is not None
    assert field_values(found) == field_values(key)
    assert field_values(found.user) == field_values(team.alice.user)
    key.revoked_at = timezone.now()
    key.save()
    assert access.apikey_live(key.prefix) is None


def test_the_lock_defers_the_long_texts_and_reads_them_on_use(session_of):
    session = session_of(system_prompt="You are careful.", tools=[{"name": "Read"}])
    locked = ingest.lock_open_session(AgentSession.objects.select_related("project").get(pk=session.pk))
    assert locked.get_deferred_fields() == {"system_prompt", "tools"}
    assert (locked.system_prompt, locked.tools) == ("You are careful.", [{"name": "Read"}])


@DATABASE
@given(
    content=st.lists(st.dictionaries(texts, json_values, max_size=3), max_size=3) | texts, tokens=st.integers(0, 10**6)
)
def test_an_update_writes_what_save_writes(session_of, content, tokens):
    session = session_of()
    message = Message.objects.create(
        session=session, seq=1, role="user", content="x", tokens=1, created_at=timezone.now()
    )
    before = AgentSession.objects.get(pk=session.pk).updated_at
    message.content, message.tokens = content, tokens
    sql_rows.update(message, ["content", "tokens"])
    session.message_tokens = tokens
    sql_rows.update(session, ["message_tokens", "updated_at"])
    assert (Message.objects.get(pk=message.pk).content, Message.objects.get(pk=message.pk).tokens) == (content, tokens)
    reread = AgentSession.objects.get(pk=session.pk)
    assert reread.message_tokens == tokens and reread.updated_at >= before
    assert reread.updated_at == session.updated_at  # auto_now set on the instance, as save sets it
    assert timezone.now() - reread.updated_at < timedelta(minutes=1)


def test_an_update_of_a_row_that_is_gone_fails_as_save_does(session_of):
    session = session_of()
    AgentSession.objects.filter(pk=session.pk).delete()
    with pytest.raises(DatabaseError):
        sql_rows.update(session, ["name"])


def test_a_conditional_update_matches_null_as_the_orms_filter_does(session_of):
    session = session_of()
    assert session.context_window_override is None
    changed = sql_rows.update_if(AgentSession, session.pk, {"level": "remind"}, {"context_window_override": None})
    assert changed == 1 and AgentSession.objects.get(pk=session.pk).level == "remind"
    stale = sql_rows.update_if(AgentSession, session.pk, {"level": "ok"}, {"context_window_override": 5_000})
    assert stale == 0 and AgentSession.objects.get(pk=session.pk).level == "remind"


@DATABASE
@given(tokens=st.integers(0, 10**6), cost=st.none() | st.decimals(0, 1000, places=6), model=texts)
def test_an_insert_writes_what_create_writes_and_a_second_one_nothing(session_of, tokens, cost, model):
    session = session_of()
    key = uuid.uuid4()
    fields = {"session": session, "project_id": session.project_id, "created_at": timezone.now(), "model": model,
              "input_tokens": tokens, "cost_usd": cost}  # fmt: skip
    row = ProviderRequest(key=key, **fields)
    assert sql_rows.insert_new(row, "key") and row.pk is not None
    stored = ProviderRequest.objects.get(key=key)
    assert field_values(stored) == field_values(ProviderRequest(pk=row.pk, key=key, **fields))
    assert not sql_rows.insert_new(ProviderRequest(key=key, **{**fields, "input_tokens": tokens + 1}), "key")
    assert ProviderRequest.objects.filter(key=key).get().input_tokens == tokens


@DATABASE
@given(contents=st.lists(st.lists(st.dictionaries(texts, json_values, max_size=3), max_size=2) | texts, max_size=4))
def test_a_multi_row_insert_writes_what_bulk_create_writes_in_order(session_of, contents):
    mine, theirs = session_of(), session_of()
    now = timezone.now()

    def rows(session: AgentSession) -> list[Message]:
        return [
            Message(session=session, seq=n, role="user", content=content, tokens=n, created_at=now, client_id=f"c{n}")
            for n, content in enumerate(contents, start=1)
        ]

    written, expected = rows(mine), rows(theirs)
    sql_rows.insert_rows(written)
    Message.objects.bulk_create(expected)
    assert [row.pk for row in written] == list(
        Message.objects.filter(session=mine).order_by("seq").values_list("pk", flat=True)
    )

    def stored(session: AgentSession) -> list[dict[str, object]]:
        skip = {"id", "session_id", "received_at"}
        found = Message.objects.filter(session=session).order_by("seq")
        return [{k: v for k, v in field_values(row).items() if k not in skip} for row in found]

    assert stored(mine) == stored(theirs)


@DATABASE
@given(
    contents=st.lists(st.lists(st.dictionaries(texts, json_values, max_size=3), max_size=2) | texts, max_size=4),
    ids=st.lists(st.none() | texts, min_size=4, max_size=4),
)
def test_a_session_read_with_its_last_two_messages_is_the_session_and_those_rows(session_of, contents, ids):
    session = session_of()
    now = timezone.now()
    rows = [
        Message(session=session, seq=n, role="user", content=content, tokens=1, created_at=now, client_id=ids[n - 1])
        for n, content in enumerate(contents, start=1)
    ]
    Message.objects.bulk_create(rows)
    AgentSession.objects.filter(pk=session.pk).update(last_seq=len(rows))
    found, ends = session_rows.session_and_ends(session.pk) or (None, None)
    assert found is not None and ends is not None
    assert field_values(found) == field_values(session_rows.session_where("s.id = %s", [session.pk]))
    last = len(rows)
    wanted = [seq for seq in (last - 1, last) if seq > 0]
    assert ends.covering(found, wanted) == ingest.stored_ids_and_contents(found, wanted)
    assert ends.covering(found, [last - 2]) is None  # not among them: read
    found.last_seq += 1
    assert ends.covering(found, [last]) is None  # the session moved on: read
    assert session_rows.session_and_ends(session.pk + 10_000) is None


def test_statements_sent_together_write_what_each_writes(session_of):
    mine, theirs = session_of(), session_of()
    assert sql_rows.rows_with(None, []) == []
    mine.message_tokens, theirs.message_count = 5, 8
    assert sql_rows.rows_with(None, [sql_rows.update_statement(mine, ["message_tokens"])]) == []
    assert AgentSession.objects.get(pk=mine.pk).message_tokens == 5
    mine.message_count = 7
    writes = [sql_rows.update_statement(mine, ["message_count"]), sql_rows.update_statement(theirs, ["message_count"])]
    assert sql_rows.rows_with(None, writes) == []
    assert AgentSession.objects.get(pk=mine.pk).message_count == 7
    assert AgentSession.objects.get(pk=theirs.pk).message_count == 8


@pytest.mark.postgres  # prepared statements are PostgreSQL's
def test_the_statements_written_once_are_prepared_and_the_orms_are_not(session_of):
    """A statement of ``sql_rows`` is prepared on the connection (Postgres plans it once) and still
    does what it did; the ORM's own statements (bound on the client) never are, nor counted; with
    prepared statements off, none is."""
    from django.db import connection
    from django.test import override_settings

    session = session_of()
    written = [sql_rows.update_if(AgentSession, session.pk, {"name": f"n{n}"}, {}) for n in range(8)]
    for _ in range(8):
        assert access.apikey_live("ctx_nokey00") is None
        AgentSession.objects.filter(pk=session.pk).values_list("external_id").first()
    with override_settings(CTX_DB_PREPARED_STATEMENTS=False):
        unprepared = [sql_rows.update_if(AgentSession, session.pk, {"external_id": f"x{n}"}, {}) for n in range(8)]

    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert written == unprepared == [1] * 8
    assert AgentSession.objects.values_list("name", "external_id").get(pk=session.pk) == ("n7", "x7")
    assert any(s.startswith("UPDATE") and '"name" = $1' in s for s in prepared), prepared
    assert any("WHERE k.prefix = $1" in s for s in prepared), prepared
    assert not any(s.startswith("UPDATE") and '"external_id" = $1' in s for s in prepared), prepared  # off
    orms = 'SELECT "sessions_app_agentsession"."external_id" FROM'
    assert not any(s.startswith(orms) for s in prepared), prepared
    # Outside these statements the connection prepares (and counts) nothing, as Django leaves it.
    assert connection.connection.prepare_threshold is None
