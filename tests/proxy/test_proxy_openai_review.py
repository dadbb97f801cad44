"""The OpenAI proxy, from a hostile review, against a raw upstream that answers exactly the bytes
queued (``raw_upstream``): whole conversations (ids an upstream repeats or leaves out, tool call ids
reused or rewritten by the agent, legacy function calls, the end user's ``user`` field, assistant
messages sent back with extras), streams (several choices, refusals, ``data:`` without a space,
keep-alive comments, CRLF, pieces split anywhere, a finished stream without ``[DONE]``) and the wire
(a compressed whole answer, an upstream error); every session recorded once, in order, and read back."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from sessions_app.models import AgentSession, IngestRejection
from sessions_app.selectors import usage
from tests.proxy.raw_upstream import Raw, chunk, completion, post, stored
from tests.proxy_client import assert_sessions_read_back

pytestmark = pytest.mark.django_db


@pytest.fixture
def raw(settings: Any) -> Any:
    settings.CTX_PROXY_RECORDERS = 0  # the test's data lives in its transaction
    with Raw() as server:
        settings.CTX_PROXY_OPENAI_URL = server.base_url
        yield server


USE = {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45}


def converse(client, team, raw, replies, *, stream=False, first=None):
    """An agent: each reply queued, the answer appended as the SDK gives it, then a new user turn."""
    history = first or [{"role": "user", "content": "turn 0"}]
    for n, reply in enumerate(replies):
        raw.json(reply)
        status, body, _ = post(client, team.bob.key, {"model": "gpt-4o", "messages": history})
        assert status == 200, body
        msg = json.loads(body)["choices"][0]["message"]
        history = [*history, msg]
        for call in msg.get("tool_calls") or []:
            history.append({"role": "tool", "tool_call_id": call["id"], "content": f"out {call['id']}"})
        if not msg.get("tool_calls"):
            history.append({"role": "user", "content": f"turn {n + 1}"})
    return history


@pytest.mark.parametrize("cid", ["chatcmpl-123", ""], ids=["constant-id", "empty-id"])
def test_replies_with_a_repeated_completion_id_are_each_recorded(team, raw, client, api_as, proxy_failures, cid):
    # An OpenAI-compatible server that reuses its completion id (or sends "") and a model that says the same twice.
    replies = [completion("First answer.", cid=cid, usage=USE), completion("Second answer.", cid=cid, usage=USE)]
    converse(client, team, raw, replies)
    rows = stored(team)
    assert [r for r, _ in rows[0]] == ["user", "assistant", "user", "assistant"], rows


def test_same_reply_twice_without_id(team, raw, client, api_as, proxy_failures):
    def no_id(text):
        c = completion(text, usage=USE)
        del c["id"]
        return c

    converse(client, team, raw, [no_id("OK."), no_id("OK.")])
    rows = stored(team)
    assert [r for r, _ in rows[0]] == ["user", "assistant", "user", "assistant"], rows
    assert usage.session_status(AgentSession.objects.get())["token_source"] == "exact"


def test_tool_call_ids_reused_across_turns(team, raw, client, api_as, proxy_failures):
    # Servers that number calls per response (call_0, call_1 …) reuse ids turn after turn.
    call = [{"id": "call_0", "name": "read_file", "arguments": '{"path": "a.py"}'}]
    call2 = [{"id": "call_0", "name": "read_file", "arguments": '{"path": "b.py"}'}]
    converse(
        client,
        team,
        raw,
        [
            completion(None, tool_calls=call, usage=USE),
            completion(None, tool_calls=call2, usage=USE),
            completion("Done.", usage=USE),
        ],
    )
    rows = stored(team)
    assert len(rows) == 1, rows
    assert [r for r, _ in rows[0]] == ["user", "assistant", "tool", "assistant", "tool", "assistant"], rows
    assert not IngestRejection.objects.exists(), list(IngestRejection.objects.values("code", "detail", "position"))
    assert_sessions_read_back(team, api_as(team.bob), client)


def test_legacy_function_call_two_rounds(team, raw, client, api_as, proxy_failures):
    def fc(args):
        return completion(None, extra={"function_call": {"name": "read_file", "arguments": args}}, usage=USE)

    history = [{"role": "user", "content": "go"}]
    for reply in (fc('{"path": "a"}'), fc('{"path": "b"}'), completion("Done.", usage=USE)):
        raw.json(reply)
        _status, body, _ = post(
            client,
            team.bob.key,
            {"model": "gpt-4o", "messages": history, "functions": [{"name": "read_file", "parameters": {}}]},
        )
        msg = json.loads(body)["choices"][0]["message"]
        history.append(msg)
        if msg.get("function_call"):
            history.append({"role": "function", "name": "read_file", "content": "data"})
    rows = stored(team)
    assert len(rows) == 1 and [r for r, _ in rows[0]] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ], rows
    assert not IngestRejection.objects.exists(), list(IngestRejection.objects.values("code", "detail", "position"))
    assert [r.getMessage() for r in proxy_failures if r.exc_info] == []


def test_openai_user_field_is_an_end_user_not_a_conversation(team, raw, client, api_as, proxy_failures):
    # OpenAI's `user` names the end user (the same for all their conversations), not a conversation.
    sysmsg = {"role": "system", "content": "You are a support bot."}
    a = [sysmsg, {"role": "user", "content": "conversation A"}]
    b = [sysmsg, {"role": "user", "content": "conversation B"}]
    for turn in range(3):
        for name, hist in (("A", a), ("B", b)):
            raw.json(completion(f"{name} reply {turn}", usage=USE))
            _status, body, _ = post(client, team.bob.key, {"model": "gpt-4o", "messages": hist, "user": "end-user-42"})
            hist.append(json.loads(body)["choices"][0]["message"])
            hist.append({"role": "user", "content": f"{name} turn {turn + 1}"})
    sessions = AgentSession.objects.filter(project=team.project)
    assert sessions.count() == 2, [(s.pk, s.external_id, s.last_seq) for s in sessions]


def test_assistant_sent_back_with_extras(team, raw, client, api_as, proxy_failures):
    # The SDK's model_dump of a message: refusal/audio/function_call None, annotations [], name.
    call = [
        {"id": "call_a", "name": "read_file", "arguments": '{"path": "a.py"}'},
        {"id": "call_b", "name": "read_file", "arguments": '{"path": "b.py"}'},
    ]
    history = [
        {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
        {
            "role": "user",
            "name": "bob",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
            ],
        },
    ]
    raw.json(completion(None, tool_calls=call, usage=USE))
    _status, body, _ = post(client, team.bob.key, {"model": "gpt-4o", "messages": history})
    msg = json.loads(body)["choices"][0]["message"]
    msg.update({"refusal": None, "audio": None, "function_call": None, "annotations": [], "content": ""})
    history.append(msg)
    # tool messages in the reverse order, one with content parts
    history.append({"role": "tool", "tool_call_id": "call_b", "content": [{"type": "text", "text": "B"}]})
    history.append({"role": "tool", "tool_call_id": "call_a", "content": "A"})
    history.append({"role": "developer", "content": "Now summarise."})
    raw.json(completion("Both read.", usage=USE))
    post(client, team.bob.key, {"model": "gpt-4o", "messages": history})
    history.append({"role": "assistant", "content": "Both read."})
    history.append({"role": "user", "content": "thanks"})
    raw.json(completion("np", usage=USE))
    post(client, team.bob.key, {"model": "gpt-4o", "messages": history})
    rows = stored(team)
    assert len(rows) == 1, rows
    assert [r for r, _ in rows[0]] == [
        "user",
        "assistant",
        "tool",
        "tool",
        "system",
        "assistant",
        "user",
        "assistant",
    ], rows
    assert_sessions_read_back(team, api_as(team.bob), client)
    assert [r.getMessage() for r in proxy_failures if r.exc_info] == []
    st = usage.session_status(AgentSession.objects.get())
    assert st["token_source"] == "exact" and st["used"] == 45, st


EXOTIC = [
    {
        "role": "system",
        "content": [{"type": "text", "text": "sys"}, {"type": "image_url", "image_url": {"url": "data:;base64,AAAA"}}],
    },
    {
        "role": "user",
        "content": [
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
            {"type": "file", "file": {"file_id": "file-1", "filename": "a.pdf"}},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,"}},
            {"type": "image_url", "image_url": "not-a-dict"},
            {"type": "image_url"},
            {"type": "text", "text": ""},
            "bare string",
            7,
            None,
        ],
    },
    {
        "role": "assistant",
        "content": [{"type": "refusal", "refusal": "no"}],
        "audio": {"id": "audio_1"},
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "[1,2]"}},
            {"id": "c2", "type": "custom", "custom": {"name": "g", "input": "raw text"}},
            {"type": "function", "function": {"name": "", "arguments": "{bad"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "content": [{"type": "image_url", "image_url": {"url": "https://i/x.png"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": None},
    {"role": "tool", "content": "no id"},
    {"role": "developer", "content": None},
    {"role": "user", "content": []},
    {"role": "critic", "content": "odd role"},
    {"role": "assistant", "content": None},
    {"role": "user", "content": "go on"},
]


@pytest.mark.parametrize("cut", range(3, len(EXOTIC) + 1))
def test_exotic_history_grows_and_reads_back(team, raw, client, api_as, proxy_failures, cut):
    for n in (2, cut):
        raw.json({"error": {"message": "busy", "type": "server_error"}}, status=503)  # no reply recorded
        status, body, _ = post(client, team.bob.key, {"model": "gpt-4o", "messages": EXOTIC[:n]})
        assert status == 503, body
    rows = stored(team)
    assert len(rows) == 1, rows
    assert_sessions_read_back(team, api_as(team.bob), client)
    assert [r.getMessage() for r in proxy_failures if r.exc_info] == []
    assert not IngestRejection.objects.exists(), list(IngestRejection.objects.values("code", "detail", "position"))


def test_agent_rewrites_tool_call_ids(team, raw, client, api_as, proxy_failures):
    # Agents/frameworks that rewrite tool call ids (Mistral's 9-char ids, LiteLLM, LangChain re-serialising).
    raw.json(
        completion(None, tool_calls=[{"id": "call_Xy12abCD34efGH", "name": "read_file", "arguments": "{}"}], usage=USE)
    )
    history = [{"role": "user", "content": "read"}]
    post(client, team.bob.key, {"model": "gpt-4o", "messages": history})
    history += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "Xy12abCD3", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "Xy12abCD3", "content": "data"},
    ]
    for n in range(3):
        raw.json(completion(f"answer {n}", usage=USE))
        post(client, team.bob.key, {"model": "gpt-4o", "messages": history})
        history += [{"role": "assistant", "content": f"answer {n}"}, {"role": "user", "content": f"more {n}"}]
    rows = stored(team)
    assert sum(len(r) for r in rows) >= 8, rows
    assert not IngestRejection.objects.exists(), list(IngestRejection.objects.values("code", "detail", "position"))


ASK = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": True}


def test_n2_stream_choices_are_not_mixed(team, raw, client, api_as, proxy_failures):
    evs = [chunk({"role": "assistant", "content": ""}, index=0), chunk({"role": "assistant", "content": ""}, index=1)]
    for a, b in zip(["Alpha ", "one."], ["Beta ", "two."], strict=True):
        evs += [chunk({"content": a}, index=0), chunk({"content": b}, index=1)]
    evs += [chunk({}, "stop", index=0), chunk({}, "stop", index=1)]
    raw.events(evs)
    status, _, _ = post(client, team.bob.key, {**ASK, "n": 2})
    assert status == 200
    rows = stored(team)
    assert rows[0][1] == ("assistant", [{"type": "text", "text": "Alpha one."}]), rows


def test_streamed_refusal_recorded_like_plain_one(team, raw, client, api_as, proxy_failures):
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
def test_stream_oddities(team, raw, client, api_as, proxy_failures, variant):
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
    assert_sessions_read_back(team, api_as(team.bob), client)
    assert [r.getMessage() for r in proxy_failures if r.exc_info] == []


def test_stream_without_done_but_finished_is_not_stored_as_cut(team, raw, client, api_as, proxy_failures):
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


def test_gzip_answer_passes_through_readable(team, raw, client):
    # ctxweb asks for identity; an upstream (or a relay before it) that compresses anyway.
    body = json.dumps(completion("zipped", usage={"prompt_tokens": 3, "completion_tokens": 1})).encode()
    raw.queue.append((200, "application/json|content-encoding: gzip", [gzip.compress(body)]))
    _status, answer, response = post(
        client, team.bob.key, {"model": "gpt-4o", "messages": [{"role": "user", "content": "z"}]}
    )
    enc = response.headers.get("content-encoding")
    # What the caller gets must decode as the headers say.
    data = gzip.decompress(answer) if enc == "gzip" else answer
    assert json.loads(data)["choices"][0]["message"]["content"] == "zipped"


def test_error_passes_through_unchanged(team, raw, client):
    err = {"error": {"message": "bad thing", "type": "invalid_request_error", "param": "messages", "code": "x"}}
    raw.json(err, status=400)
    status, answer, _response = post(
        client, team.bob.key, {"model": "gpt-4o", "messages": [{"role": "user", "content": "e"}]}
    )
    assert status == 400 and json.loads(answer) == err
