"""Search (``GET /api/v1/search/``, ``selectors.search``): a word that is only in what a compaction
replaced, or only in an archived session, is found, ranked, by everyone in the project and by no one
outside it; scoped to a session, a role, a state; bad queries are a 400. Runs on SQLite (the embedded
default) and on PostgreSQL (full-text search with its GIN indexes) alike."""

from __future__ import annotations

import io
import itertools
import json
import re
import string
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.management import call_command
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from sessions_app.models import Message, MessageState
from sessions_app.selectors import search
from sessions_app.services import compaction_runs, retention
from tests.conftest import Api
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
_SERIAL = itertools.count()
WORDS = st.text(string.ascii_lowercase, min_size=6, max_size=10).map(lambda w: "zq" + w)


def _with_word(messages: list[dict], word: str, at: int) -> list[dict]:
    """The messages with ``word`` on an ordinary line of the ``at``-th tool output (one a compaction clears)."""
    results = [m for m in messages if isinstance(m["content"], list) and m["content"][0]["type"] == "tool_result"]
    block = results[at]["content"][0]
    block["content"] = f"compiled {word} module\n" + block["content"]
    return messages


def _cleared_session(session_of, word: str):
    session = session_of(name="cleared", auto_compact=False)
    append(session, _with_word(agent_rounds(12), word, 0))
    record = compaction_runs.compaction_request(session=session, level="compact", user=None)
    assert compaction_runs.compaction_run(record.pk) == "succeeded"
    return session


def _archived_session(session_of, word: str):
    with time_machine.travel(T0, tick=False):
        session = session_of(name="archived", auto_compact=False)
        append(
            session, [{"role": "user", "content": f"remember {word} for later"}, {"role": "assistant", "content": "ok"}]
        )
    with time_machine.travel(T0 + timedelta(days=60), tick=False):  # before the others were made: only it is due
        retention.prune_run()
    return session


def _search(persona, client, **params) -> list[dict]:
    response = Api(client, persona).get("/api/v1/search/", data=params)
    assert response.status_code == 200, response.content
    return response.json()["results"]


# Each example makes sessions of its own, with words of its own: nothing carries over between them.
@settings(
    max_examples=6, deadline=None, phases=[Phase.generate], suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cleared_word=WORDS, archived_word=WORDS)
def test_a_word_only_in_a_cleared_original_or_an_archived_session_is_found_by_members_only(
    team, client, session_of, cleared_word, archived_word
):
    serial = next(_SERIAL)  # words of their own: hypothesis draws one word in several examples
    cleared_word, archived_word = f"{cleared_word}x{serial}y", f"{archived_word}x{serial}w"
    cleared = _cleared_session(session_of, cleared_word)
    archived = _archived_session(session_of, archived_word)
    # Where the words are now: the cleared one in no message's current content, the other archived.
    assert not any(
        cleared_word in str(c) for c in Message.objects.filter(session=cleared).values_list("content", flat=True)
    )
    assert set(Message.objects.filter(session=archived).values_list("state", flat=True)) == {MessageState.ARCHIVED}

    for persona in (team.alice, team.bob, team.carol):  # admin, member, viewer
        hits = _search(persona, client, q=cleared_word)
        assert [(h["kind"], h["session"]) for h in hits] == [("original", cleared.pk)]
        assert hits[0]["rank"] > 0 and "<mark>" in hits[0]["snippet"] and hits[0]["ref"] == f"m{hits[0]['seq']}"
        hits = _search(persona, client, q=archived_word)
        assert [(h["kind"], h["session"], h["state"]) for h in hits] == [("message", archived.pk, "archived")]
    assert _search(team.mallory, client, q=cleared_word) == []
    assert _search(team.mallory, client, q=archived_word) == []
    assert _search(team.alice, client, q=cleared_word, session=archived.pk) == []
    in_its_session = _search(team.bob, client, q=cleared_word, session=cleared.pk)
    assert [(h["kind"], h["session"]) for h in in_its_session] == [("original", cleared.pk)]
    assert len(_search(team.alice, client, q=archived_word, session=archived.pk, state="archived")) == 1
    assert _search(team.alice, client, q=archived_word, state="active") == []
    assert _search(team.alice, client, q=archived_word, project=team.project.pk + 1000) == []


def test_hits_are_ranked_best_first_and_paged(team, client, session_of):
    session = session_of(name="ranked", auto_compact=False)
    append(
        session,
        [
            {"role": "user", "content": "zqranked once here"},
            {"role": "assistant", "content": "zqranked zqranked zqranked: three times"},
            {"role": "user", "content": "zqranked zqranked twice"},
        ]
        + [{"role": "assistant", "content": f"filler {i} zqranked"} for i in range(30)],
    )
    seq_of = {c: seq for seq, c in Message.objects.filter(session=session).values_list("seq", "content")}
    api = Api(client, team.alice)
    first = api.get("/api/v1/search/", data={"q": "zqranked", "page_size": 2}).json()
    three, two = seq_of["zqranked zqranked zqranked: three times"], seq_of["zqranked zqranked twice"]
    assert [h["seq"] for h in first["results"]] == [three, two]
    assert first["next"] and first["previous"] is None
    ranks = [h["rank"] for h in _search(team.alice, client, q="zqranked", page_size=100)]
    assert ranks == sorted(ranks, reverse=True) and len(ranks) == 33
    second = api.get(first["next"]).json()
    assert second["previous"] and {h["seq"] for h in second["results"]}.isdisjoint({three, two})


def test_a_word_in_more_rows_than_are_ranked_ranks_the_newest(team, client, session_of, monkeypatch):
    monkeypatch.setattr(search, "CANDIDATES", 5)
    session = session_of(name="common", auto_compact=False)
    append(session, [{"role": "user", "content": f"zqcommon row {i}" + " zqcommon" * (i % 3)} for i in range(12)])
    hits = _search(team.alice, client, q="zqcommon", session=session.pk, page_size=100)
    assert sorted(h["seq"] for h in hits) == list(range(8, 13))  # the newest five, best first
    assert [h["rank"] for h in hits] == sorted((h["rank"] for h in hits), reverse=True)
    assert _search(team.alice, client, q="the of", session=session.pk) == []  # only stop words: nothing, not an error


def test_a_word_deep_in_a_long_tool_output_is_marked_in_its_snippet(team, client, session_of):
    session = session_of(name="long", auto_compact=False)
    output = "lorem ipsum " * 3_000 + "the zqdeepwords were here " + "dolor sit " * 3_000
    append(session, [{"role": "user", "content": output}])
    (hit,) = _search(team.alice, client, q="zqdeepword", session=session.pk)  # a stem of the word in the text
    assert "<mark>zqdeepword" in hit["snippet"] and len(hit["snippet"]) < 2_000


@pytest.mark.parametrize(
    ("params", "code"),
    [({}, "query_required"), ({"q": "  "}, "query_required"), ({"q": "x" * 501}, "query_invalid"),
     ({"q": "a\x00b"}, "query_invalid"), ({"q": "ok", "state": "gone"}, "state_invalid"),
     ({"q": "ok", "page": "0"}, "invalid_page"), ({"q": "ok", "page_size": "1000"}, "invalid_page_size")],
)  # fmt: skip
def test_a_bad_search_is_a_400_that_says_why(team, client, params, code):
    response = Api(client, team.alice).get("/api/v1/search/", data=params)
    assert response.status_code == 400
    assert response.json()["code"] == code and response.json()["detail"]


def test_search_needs_a_key(client):
    assert client.get("/api/v1/search/", data={"q": "x"}).status_code in (401, 403)


def test_ctx_search_finds_every_projects_hits_as_the_api_does_for_a_member(team, client, session_of):
    session = _archived_session(session_of, "zqclisearchword")
    out = io.StringIO()
    call_command("ctx", "search", "zqclisearchword", "--json", stdout=out)
    (hit,) = json.loads(out.getvalue())
    assert (hit["session_id"], hit["kind"], hit["state"]) == (session.pk, "message", "archived")
    assert [h["ref"] for h in _search(team.alice, client, q="zqclisearchword")] == [hit["ref"]]
    out = io.StringIO()
    call_command("ctx", "search", "zqclisearchword", "--session", str(session.pk + 1000), stdout=out)
    assert out.getvalue().strip() == "Nothing found."


def test_the_search_page_links_each_hit_to_its_message_with_the_match_marked(team, client, session_of):
    word = "zqpagesearchword"
    cleared = _cleared_session(session_of, word)
    client.force_login(team.carol.user)
    page = client.get("/search/", {"q": word, "project": team.project.pk})
    assert page.status_code == 200
    html = page.content.decode()
    (link,) = re.findall(r'href="(/messages/\d+/original/\?q=[^"]+)"', html)
    assert f"<mark>{word}</mark>" in html and "before compaction" in html
    shown = client.get(link.replace("&amp;", "&"))
    assert shown.status_code == 200 and f"<mark>{word}</mark>" in shown.content.decode()
    assert str(cleared.pk) in link or cleared.name in html
    assert client.get("/search/", {"q": "<script>" + word}).content.decode().count("<script>" + word) == 0
    client.force_login(team.mallory.user)
    outside = client.get("/search/", {"q": word}).content.decode()
    assert "search-hit" not in outside and "Nothing found" in outside
    assert client.get(link.replace("&amp;", "&")).status_code == 404
