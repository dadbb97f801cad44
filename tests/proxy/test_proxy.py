"""The Anthropic-compatible proxy, driven by the real ``anthropic`` SDK over HTTP (Django's live
server) against the fake Anthropic server: the caller gets what the upstream sent, the session holds
every message once however often the history is resent, and STATUS is the upstream's own usage."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import anthropic
import pytest

from sessions_app.models import AgentSession, Message
from sessions_app.selectors import usage
from tests.conftest import Team
from tests.fakes.anthropic_server import FakeAnthropic
from tests.proxy_client import as_kept, assert_stored_nowhere, sdk_reply

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-4-5"
CALLER_KEY = "sk-ant-callers-own-key-0123456789"
SYSTEM = "You are a careful coding agent."
TOOLS = [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {}}}]


@pytest.fixture
def fake(settings: Any) -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        settings.CTX_PROXY_UPSTREAM_URL = server.base_url
        yield server


def proxied(proxy_sdk: Any, team: Team, headers: dict[str, str] | None = None) -> anthropic.Anthropic:
    return proxy_sdk({"ctxweb-api-key": team.bob.key, **(headers or {})}, api_key=CALLER_KEY)


def direct(fake: FakeAnthropic) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=CALLER_KEY, base_url=fake.base_url, max_retries=0)


def without_stream_id(raw: bytes) -> bytes:
    first = json.loads(raw.split(b"data: ", 1)[1].split(b"\n", 1)[0])  # message_start
    return raw.replace(first["message"]["id"].encode(), b"msg_")


def without_id(raw: bytes) -> dict[str, Any]:
    body = json.loads(raw)
    body.pop("id", None)
    return body


TURNS: list[tuple[str, list[dict[str, Any]], dict[str, Any]]] = [
    # (what the user says next, what the model answers, the answer's usage beyond the computed one)
    (
        "Fix the failing test in src/app.py",
        [{"type": "text", "text": "Reading it."}, {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {}}],
        {"cache_read_input_tokens": 40},
    ),
    ("", [{"type": "text", "text": "Found it: an off-by-one in the loop. Fixed."}], {"cache_creation_input_tokens": 9}),
    ("Thanks. Now run the tests.", [{"type": "text", "text": "All 12 pass."}], {}),
]


def run_agent(client: anthropic.Anthropic, fake: FakeAnthropic, *, stream: bool) -> list[dict[str, Any]]:
    """Three turns of a tool-using agent that resends its whole history each time, as agents do;
    the history it ends with."""
    history: list[dict[str, Any]] = []
    for said, answer, extra in TURNS:
        if said:
            history.append({"role": "user", "content": said})
        else:  # the tool's result answers the call
            history.append(
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "12 lines"}]}
            )
        fake.queue_message(answer, stop_reason="tool_use" if len(answer) > 1 else "end_turn", usage=extra)
        kwargs = {"model": MODEL, "max_tokens": 512, "system": SYSTEM, "tools": TOOLS, "messages": history}
        history.append(as_kept(sdk_reply(client, stream=stream, **kwargs)))
    return history


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_the_caller_gets_exactly_what_the_upstream_sends(proxy_sdk, team, fake, stream):
    reply = [{"type": "text", "text": "Hello."}, {"type": "tool_use", "id": "toolu_9", "name": "Read", "input": {}}]
    body = {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    answers = []
    for c in (direct(fake), proxied(proxy_sdk, team)):
        fake.queue_message(reply, stop_reason="tool_use", usage={"cache_read_input_tokens": 3})
        response = c.messages.with_raw_response.create(**body)
        answers.append((response.http_response.status_code, response.http_response.read(), response.headers))
    (status_a, bytes_a, headers_a), (status_b, bytes_b, headers_b) = answers
    assert status_a == status_b == 200
    if stream:  # the same events, byte for byte but for the message id
        assert without_stream_id(bytes_a) == without_stream_id(bytes_b)
    else:
        assert without_id(bytes_a) == without_id(bytes_b)
    assert headers_b["content-type"] == headers_a["content-type"]
    assert headers_b["request-id"].startswith("req_") and headers_b["ctxweb-recorded"] == "yes"
    assert Message.objects.filter(session_id=int(headers_b["ctxweb-session"])).count() == 2  # the ask, the reply
    # The caller's own key went upstream; ctxweb's did not.
    sent = fake.requests_for("messages")[-1]["headers"]
    assert CALLER_KEY in (sent.get("x-api-key", ""), sent.get("authorization", "").removeprefix("Bearer "))
    assert not any(name.startswith("ctxweb-") for name in sent)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_tool_loop_is_recorded_once_and_status_is_the_upstreams_usage(proxy_sdk, team, fake, stream):
    history = run_agent(proxied(proxy_sdk, team), fake, stream=stream)
    session = AgentSession.objects.get(project=team.project)
    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    assert [(m["role"], m["content"]) for m in history] == stored
    assert len(stored) == len(history) == 6  # every message once, though each request resent them all
    assert (session.system_prompt, session.tools, session.model) == (SYSTEM, TOOLS, MODEL)
    status = usage.session_status(session)
    assert status["token_source"] == "exact"
    assert status["used"] == fake_answer_usage(fake, history) > 0


def fake_answer_usage(fake: FakeAnthropic, history: list[dict[str, Any]]) -> int:
    """What the fake's last answer said it used: its input (with the cache figures queued for that
    turn) and its output."""
    body = fake.requests_for("messages")[-1]["body"]
    text = "".join(b.get("text", "") for b in history[-1]["content"] if b.get("type") == "text")
    output = max(1, -(-len(text.encode()) // 4))
    return fake.count_tokens_for(body) + sum(TURNS[-1][2].values()) + output


def test_errors_and_their_headers_reach_the_caller_unchanged(proxy_sdk, team, fake):
    client = proxied(proxy_sdk, team)
    fake.queue_error(429, retry_after_ms=1, message="slow down")
    with pytest.raises(anthropic.RateLimitError) as limited:
        client.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert limited.value.response.headers["retry-after-ms"] == "1"
    assert limited.value.body["error"]["message"] == "slow down"
    fake.queue_error(529)
    with pytest.raises(anthropic.APIStatusError) as overloaded:
        client.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert overloaded.value.status_code == 529 and overloaded.value.body["error"]["type"] == "overloaded_error"


def test_without_a_ctxweb_key_the_sdk_sees_an_authentication_error_and_nothing_goes_upstream(proxy_sdk, team, fake):
    client = proxy_sdk({}, api_key=CALLER_KEY)
    with pytest.raises(anthropic.AuthenticationError) as refused:
        client.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert "ctxweb-api-key" in refused.value.body["error"]["message"]
    assert fake.requests == [] and not AgentSession.objects.exists()


def test_the_callers_anthropic_key_is_never_stored(proxy_sdk, team, fake):
    run_agent(proxied(proxy_sdk, team), fake, stream=True)
    assert_stored_nowhere(CALLER_KEY)


def test_count_tokens_is_passed_through(proxy_sdk, team, fake):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "How long is this?"}]}
    counted = proxied(proxy_sdk, team).messages.count_tokens(**body)
    assert counted.input_tokens == fake.count_tokens_for(body)
    assert not AgentSession.objects.exists()  # counting records nothing


def ask(client: anthropic.Anthropic, fake: FakeAnthropic, history: list[dict[str, Any]], said: str) -> None:
    history.append({"role": "user", "content": said})
    fake.queue_reply(f"answer to {said}")
    reply = client.messages.create(
        model=MODEL, max_tokens=64, messages=cast("list[anthropic.types.MessageParam]", history)
    )
    history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})


def test_each_conversation_is_one_session_found_again_by_its_start(proxy_sdk, team, fake):
    client = proxied(proxy_sdk, team)
    first: list[dict[str, Any]] = []
    second: list[dict[str, Any]] = []
    for n in range(3):
        ask(client, fake, first, f"first conversation, turn {n}")
        ask(client, fake, second, f"second conversation, turn {n}")
    sessions = list(AgentSession.objects.filter(project=team.project).order_by("pk"))
    assert len(sessions) == 2 and [s.message_count for s in sessions] == [6, 6]
    assert [m["content"] for m in first[::2]] == list(
        Message.objects.filter(session=sessions[0], role="user").order_by("seq").values_list("content", flat=True)
    )


def test_a_rewritten_history_continues_in_a_fresh_linked_session(proxy_sdk, team, fake):
    client = proxied(proxy_sdk, team, headers={"ctxweb-session": "agent-run-7"})
    history: list[dict[str, Any]] = []
    for n in range(2):
        ask(client, fake, history, f"turn {n}")
    # The agent compacted its own history: it now starts with a summary of the above.
    rewritten = [{"role": "user", "content": "Summary of the work so far: two turns."}]
    ask(client, fake, rewritten, "go on")
    old, fresh = AgentSession.objects.filter(project=team.project).order_by("pk")
    assert fresh.external_id == "agent-run-7" and fresh.parent_id == old.pk
    assert old.external_id.startswith("agent-run-7@") and old.message_count == 4
    roles = list(Message.objects.filter(session=fresh).order_by("seq").values_list("role", flat=True))
    assert roles == ["user", "user", "assistant"]


@pytest.mark.parametrize("where", ["key check", "session lookup", "recording", "reply"])
def test_when_ctxweb_fails_the_call_still_goes_through_unrecorded_and_the_gap_is_flagged(
    proxy_sdk, team, fake, monkeypatch, where
):
    from django.db import OperationalError

    from sessions_app.services import ingest, keys, proxy

    def down(*args: Any, **kwargs: Any) -> Any:
        raise OperationalError("connection to server at 127.0.0.1 failed")

    target = {
        "key check": (keys, "apikey_authenticate"),
        "session lookup": (proxy, "proxy_session_for"),
        "recording": (proxy.recording, "proxy_record_request"),
        "reply": (ingest, "message_append"),
    }[where]
    client = proxied(proxy_sdk, team)
    history: list[dict[str, Any]] = []
    with monkeypatch.context() as outage:
        outage.setattr(*target, down)
        fake.queue_reply("Still here.")
        history.append({"role": "user", "content": "hi"})
        response = client.messages.with_raw_response.create(model=MODEL, max_tokens=64, messages=history)
        assert response.parse().content[0].text == "Still here."
        # Before the request is forwarded, the header can tell; a failure once the answer is out can't.
        assert response.headers["ctxweb-recorded"] == ("no" if where in ("key check", "session lookup") else "yes")
        assert Message.objects.filter(role="assistant").count() == 0
    # ctxweb is back: the next request brings the missed messages, and the session says what was missed.
    history += [{"role": "assistant", "content": [{"type": "text", "text": "Still here."}]}]
    ask(client, fake, history, "and now?")
    session = AgentSession.objects.get(project=team.project)
    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    assert stored == [(m["role"], m["content"]) for m in history]
    assert session.unrecorded_requests == 1 and session.unrecorded_from <= session.unrecorded_to
    assert any("without recording" in w for w in usage.session_status(session)["warnings"])
    ask(client, fake, history, "once more")  # flagged once, not again
    session.refresh_from_db()
    assert session.unrecorded_requests == 1 and session.message_count == len(history)


def test_responses_teach_the_models_calibration_once_per_interval(proxy_sdk, team, fake, settings):
    from django.core.cache import cache

    from sessions_app.models import ModelProfile

    cache.clear()
    settings.CTX_PROXY_CALIBRATION_SECONDS = 3600
    before, _ = ModelProfile.objects.get_or_create(
        name=MODEL, defaults={"context_window": 200_000, "max_output_tokens": 64_000, "calibration_factor": 1.1}
    )
    usage.forget_model_profiles()
    client = proxied(proxy_sdk, team)
    history: list[dict[str, Any]] = []
    for n in range(3):  # requests well past the smallest estimate a lesson is taken from
        history.append({"role": "user", "content": f"Turn {n}: " + "read this file carefully. " * 200})
        fake.queue_reply("Read.", input_tokens=3_000 + n)
        reply = client.messages.create(model=MODEL, max_tokens=64, messages=history)
        history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
    after = ModelProfile.objects.get(name=MODEL)
    assert after.calibration_samples == before.calibration_samples + 1  # one lesson in the interval
    assert after.calibration_factor != before.calibration_factor


def test_a_request_past_the_size_limit_is_refused_in_anthropics_words(team, fake, client, settings):
    settings.CTX_PROXY_MAX_BODY_BYTES = 100
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "x" * 200}]}
    answer = client.post(
        "/proxy/anthropic/v1/messages", data=json.dumps(body), content_type="application/json",
        HTTP_CTXWEB_API_KEY=team.bob.key, HTTP_X_API_KEY=CALLER_KEY,
    )  # fmt: skip
    assert answer.status_code == 413
    assert answer.json()["error"]["type"] == "request_too_large" and fake.requests == []


def test_without_a_key_of_its_own_a_request_goes_upstream_with_the_projects(proxy_sdk, team, fake):
    from sessions_app.services import projects

    project_key = "sk-ant-the-projects-own-key-42"
    no_key = proxy_sdk({}, api_key=team.bob.key)  # the ctxweb key as the API key: ANTHROPIC_API_KEY=ctx_…
    with pytest.raises(anthropic.AuthenticationError) as refused:  # none set yet: said before anything is stored
        no_key.messages.create(model=MODEL, max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert "admins" in refused.value.body["error"]["message"]
    assert fake.requests == [] and not AgentSession.objects.exists()
    projects.project_upstream_key_set(project=team.project, api_key=project_key)
    ask(no_key, fake, [], "with the project's key")
    sent = {k.lower(): v for k, v in fake.requests_for("messages")[-1]["headers"].items()}
    assert sent["x-api-key"] == project_key and team.bob.key not in json.dumps(sent)  # ctxweb's key stays here
    ask(proxied(proxy_sdk, team), fake, [], "with my own")  # a caller's own key goes first
    sent = {k.lower(): v for k, v in fake.requests_for("messages")[-1]["headers"].items()}
    assert CALLER_KEY in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer ")), list(sent)
    assert_stored_nowhere(project_key)


@pytest.mark.parametrize("fault", ["cut", "error event"])
def test_a_reply_cut_short_is_kept_until_the_retry_brings_it_whole(proxy_sdk, team, fake, fault):
    from django.db.models import Sum

    client = proxied(proxy_sdk, team)
    history = [{"role": "user", "content": "Explain the module."}]
    asked = {"model": MODEL, "max_tokens": 256, "messages": history}
    whole = "The module parses the config, then validates every field against its schema. " * 4
    fake.queue_reply(whole)
    if fault == "cut":
        fake.queue_stream_cut(after_events=6)
    else:
        fake.queue_stream_error(after_events=6, error_type="overloaded_error", message="Overloaded")
    with pytest.raises(anthropic.APIStatusError) as broke, client.messages.stream(**asked) as events:
        events.get_final_message()
    assert ("broke off" if fault == "cut" else "Overloaded") in str(broke.value)
    session = AgentSession.objects.get(project=team.project)
    cut = Message.objects.get(session=session, seq=2)
    assert cut.role == "assistant" and cut.metadata["proxy"]["cut"] is True
    assert "was cut" in json.dumps(cut.content) and whole not in json.dumps(cut.content)
    fake.queue_reply(whole)  # the agent sends the same request again
    with client.messages.stream(**asked) as events:
        reply = events.get_final_message()
    rows = list(Message.objects.filter(session=session).order_by("seq"))
    assert [(m.role, m.content) for m in rows] == [
        ("user", "Explain the module."),
        ("assistant", [b.model_dump(exclude_none=True) for b in reply.content]),
    ]
    session.refresh_from_db()
    assert session.message_tokens == Message.objects.filter(session=session).aggregate(t=Sum("tokens"))["t"]
    assert usage.session_status(session)["token_source"] == "exact"


def test_an_agents_subagents_and_side_requests_leave_its_main_conversation_whole(proxy_sdk, team, fake):
    """Claude Code sends its session id as metadata.user_id with every request: the main conversation,
    a subagent's, and the small ones on the side (a title) — interleaved, as it sends them. The main
    conversation is the session with the agent's id (as its hook's is); the others are its children."""
    client = proxied(proxy_sdk, team)
    metadata = {"user_id": "user_abc_account_1_session_0f3e"}
    tools = [{"name": "Bash", "description": "Run a command.", "input_schema": {"type": "object"}}]
    main: list[dict[str, Any]] = []
    subagent: list[dict[str, Any]] = []
    for n in range(3):
        for history, system, said in ((main, SYSTEM, f"main turn {n}"), (subagent, "You search code.", f"find {n}")):
            history.append({"role": "user", "content": said})
            fake.queue_reply(f"answer to {said}")
            reply = client.messages.create(
                model=MODEL, max_tokens=64, system=system, messages=history, metadata=metadata, tools=tools
            )
            history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
        fake.queue_reply("A title")
        client.messages.create(
            model="claude-haiku-4-5", max_tokens=16, system="Write a title for this conversation.",
            messages=[{"role": "user", "content": f"main turn {n}"}], metadata=metadata,
        )  # fmt: skip
    sessions = []
    for history in (main, subagent):  # each conversation whole in one session
        first = Message.objects.filter(session__model=MODEL, seq=1, content=history[0]["content"])
        session = AgentSession.objects.get(pk=first.get().session_id)
        stored = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
        assert stored == [(m["role"], m["content"]) for m in history]
        sessions.append(session)
    head, child = sessions
    assert head.external_id == metadata["user_id"] and head.parent_id is None
    assert child.external_id.startswith(metadata["user_id"] + "#") and child.parent_id is None
    assert child.metadata["sidechain_of"] == head.pk  # linked as an import links a sub-agent's session
    # Each title request starts a conversation of its own: three sessions, each continuing the one
    # before, each linked to the main conversation.
    titles = AgentSession.objects.filter(project=team.project, model="claude-haiku-4-5")
    assert all(t.metadata["sidechain_of"] == head.pk for t in titles)
    assert titles.count() == 3 and titles.filter(parent=None).count() == 1


def test_the_clients_request_to_summarize_its_conversation_is_not_a_turn_of_it(proxy_sdk, team, fake):
    """Claude Code compacting its context sends the whole history and an instruction to summarize it;
    its transcript keeps no trace of that request, nor does the session."""
    client = proxied(proxy_sdk, team)
    history = [{"role": "user", "content": "Fix the bug."}]
    fake.queue_reply("Fixed.")
    reply = client.messages.create(model=MODEL, max_tokens=64, system=SYSTEM, messages=history, tools=TOOLS)
    history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})
    session = AgentSession.objects.get(project=team.project)
    instruction = (
        "CRITICAL: Respond with TEXT ONLY.\n\nYour task is to create a detailed summary of the conversation so far, "
        "paying close attention to the user's explicit requests and your previous actions."
    )
    fake.queue_reply("<summary>The user asked for a fix; it was made.</summary>")
    raw = client.messages.with_raw_response.create(
        model=MODEL, max_tokens=64, system=SYSTEM, tools=TOOLS,
        messages=[*history, {"role": "user", "content": [{"type": "text", "text": instruction}]}],
    )  # fmt: skip
    assert raw.headers["ctxweb-recorded"] == "no"
    assert list(Message.objects.filter(session=session).values_list("role", flat=True)) == ["user", "assistant"]
    assert AgentSession.objects.filter(project=team.project).count() == 1
