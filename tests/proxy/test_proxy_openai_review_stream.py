"""The OpenAI proxy's reading of streams, from a hostile review: several choices, refusals, ``data:`` without a
space, keep-alive comments, CRLF, pieces split anywhere, a finished stream without ``[DONE]``."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from sessions_app.models import AgentSession
from sessions_app.selectors import usage
from tests.proxy.raw_upstream import Caught, Raw, chunk, completion, post, readback, stored

pytestmark = pytest.mark.django_db


@pytest.fixture
def raw(settings: Any) -> Any:
    settings.CTX_PROXY_RECORDERS = 0
    with Raw() as server:
        settings.CTX_PROXY_OPENAI_URL = server.base_url
        yield server


@pytest.fixture
def failures() -> Any:
    caught = Caught()
    logger = logging.getLogger("sessions_app.api.proxy_views")
    logger.addHandler(caught)
    yield caught.records
    logger.removeHandler(caught)


ASK = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def test_n2_stream_choices_are_not_mixed(team, raw, client, api_as, failures):
    evs = [chunk({"role": "assistant", "content": ""}, index=0), chunk({"role": "assistant", "content": ""}, index=1)]
    for a, b in zip(["Alpha ", "one."], ["Beta ", "two."], strict=True):
        evs += [chunk({"content": a}, index=0), chunk({"content": b}, index=1)]
    evs += [chunk({}, "stop", index=0), chunk({}, "stop", index=1)]
    raw.events(evs)
    status, _, _ = post(client, team.bob.key, {**ASK, "n": 2})
    assert status == 200
    rows = stored(team)
    assert rows[0][1] == ("assistant", [{"type": "text", "text": "Alpha one."}]), rows


def test_streamed_refusal_recorded_like_plain_one(team, raw, client, api_as, failures):
    raw.json(completion(None, extra={"refusal": "I can't help with that."}))
    post(client, team.bob.key, {"model": "gpt-4o", "messages": [{"role": "user", "content": "plain"}]})
    raw.events(
        [
            chunk({"role": "assistant", "content": None, "refusal": ""}),
            chunk({"refusal": "I can't "}),
            chunk({"refusal": "help with that."}),
            chunk({}, "stop"),
        ]
    )
    post(client, team.bob.key, {**ASK, "messages": [{"role": "user", "content": "streamed"}]})
    rows = stored(team)
    assert rows[0][1] == ("assistant", [{"type": "text", "text": "I can't help with that."}]), rows
    assert rows[1][1:] == [("assistant", [{"type": "text", "text": "I can't help with that."}])], rows


@pytest.mark.parametrize("variant", ["nospace", "keepalive", "bytewise", "crlf", "usage_only_last", "no_done"])
def test_stream_oddities(team, raw, client, api_as, failures, variant):
    evs = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo."}),
        chunk({}, "stop"),
    ]
    use = {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}
    evs.append(chunk(choices=[], usage=use))
    pieces = [b"data: " + json.dumps(e).encode() + b"\n\n" for e in evs] + [b"data: [DONE]\n\n"]
    if variant == "nospace":
        pieces = [p.replace(b"data: ", b"data:") for p in pieces]
    elif variant == "keepalive":
        pieces = [b": keep-alive\n\n" + p for p in pieces]
    elif variant == "bytewise":
        joined = b"".join(pieces)
        pieces = [joined[i : i + 7] for i in range(0, len(joined), 7)]
    elif variant == "crlf":
        pieces = [p.replace(b"\n", b"\r\n") for p in pieces]
    elif variant == "no_done":
        pieces = pieces[:-1]
    raw.sse(pieces)
    status, _body, _ = post(client, team.bob.key, {**ASK, "stream_options": {"include_usage": True}})
    assert status == 200
    rows = stored(team)
    assert rows[0][1][0] == "assistant" and rows[0][1][1][0] == {"type": "text", "text": "Hello."}, rows
    session = AgentSession.objects.get(project=team.project)
    st = usage.session_status(session)
    if variant != "no_done":
        assert st["token_source"] == "exact" and st["used"] == 57, st
    assert readback(client, api_as(team.bob), team) == []
    assert [r.getMessage() for r in failures if r.exc_info] == []


def test_stream_without_done_but_finished_is_not_stored_as_cut(team, raw, client, api_as, failures):
    # Some OpenAI-compatible servers end a stream after the finish_reason (and usage) without [DONE].
    use = {"prompt_tokens": 50, "completion_tokens": 7, "total_tokens": 57}
    raw.events(
        [
            chunk({"role": "assistant", "content": ""}),
            chunk({"content": "Hello."}),
            chunk({}, "stop"),
            chunk(choices=[], usage=use),
        ],
        done=False,
    )
    post(client, team.bob.key, {**ASK, "stream_options": {"include_usage": True}})
    rows = stored(team)
    assert rows[0][1] == ("assistant", [{"type": "text", "text": "Hello."}]), rows
    assert usage.session_status(AgentSession.objects.get())["token_source"] == "exact"
