"""What a hostile review of the proxy found, kept as tests: a closed session, credentials in odd
spellings, an exchange begun and never finished, two first requests at once, a history rewritten
while the recorder was behind, absurd usage figures, the provider's server-tool blocks, and gaps
counted under the right caller."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from typing import Any

import httpx2
import pytest

from sessions_app.api.proxy.recorder import RECORDER
from sessions_app.models import AgentSession, Compaction, Message, ModelProfile
from sessions_app.services import agent_sessions, projects, proxy
from tests.fakes.anthropic_server import DEFAULT_REPLY

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-4-5"


def post(live_server: Any, body: Any, headers: dict[str, str]) -> httpx2.Response:
    """One request, as raw as an agent may send it; returns once ctxweb has recorded it."""
    with httpx2.Client(timeout=30) as c:
        answer = c.post(
            f"{live_server.url}/proxy/anthropic/v1/messages",
            content=json.dumps(body).encode(),
            headers={"content-type": "application/json", **headers},
        )
    assert RECORDER.idle(10)
    return answer


def stored(session: AgentSession) -> list[tuple[str, Any]]:
    return list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))


def test_a_conversation_whose_session_was_closed_goes_on_in_a_fresh_linked_session(live_server, team, fake, caplog):
    h = {"ctxweb-api-key": team.bob.key, "x-api-key": "sk-ant-x", "ctxweb-session": "closed"}
    history: list[dict[str, Any]] = [{"role": "user", "content": "one"}]
    fake.queue_reply("first")
    post(live_server, {"model": MODEL, "max_tokens": 9, "messages": history}, h)
    old = AgentSession.objects.get(external_id="closed")
    agent_sessions.session_update(session=old, status="archived")
    history += [
        {"role": "assistant", "content": [{"type": "text", "text": "first"}]},
        {"role": "user", "content": "two"},
    ]
    fake.queue_reply("second")
    assert (
        post(live_server, {"model": MODEL, "max_tokens": 9, "messages": history}, h).headers["ctxweb-recorded"] == "yes"
    )
    fresh = AgentSession.objects.get(external_id="closed")
    assert fresh.pk != old.pk and fresh.parent_id == old.pk
    assert stored(fresh) == [(m["role"], m["content"]) for m in history] + [
        ("assistant", [{"type": "text", "text": "second"}])
    ]
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]


@pytest.mark.parametrize("auth", ["bearer {k}", "BEARER {k}", "Bearer\t{k}", "Bearer  {k}"])
def test_a_ctxweb_key_never_goes_upstream_however_it_is_spelled(live_server, team, fake, auth):
    projects.project_upstream_key_set(project=team.project, api_key="sk-ant-the-projects-key")
    h = {"ctxweb-api-key": team.bob.key, "authorization": auth.format(k=team.bob.key)}
    fake.queue_reply("hi")
    assert (
        post(
            live_server, {"model": MODEL, "max_tokens": 9, "messages": [{"role": "user", "content": "x"}]}, h
        ).status_code
        == 200
    )
    sent = fake.requests_for("messages")[-1]["headers"]
    assert (
        team.bob.key not in json.dumps(sent)
        and {k.lower(): v for k, v in sent.items()}["x-api-key"] == "sk-ant-the-projects-key"
    )


def test_a_failure_after_the_session_was_found_leaves_no_exchange_open(live_server, team, fake):
    policy = projects.policy_ensure(project=team.project)
    policy.proxy_compaction = True
    policy.save()
    h = {"ctxweb-api-key": team.bob.key, "x-api-key": "sk-ant-x", "ctxweb-session": "deep"}
    base = {"model": MODEL, "max_tokens": 9, "messages": [{"role": "user", "content": "one"}]}
    fake.queue_reply("ok")
    post(live_server, base, h)
    session = AgentSession.objects.get(external_id="deep")
    Compaction.objects.create(
        session=session, project_id=session.project_id, level="compact", status="succeeded", trigger="auto", upto_seq=1
    )
    deep: Any = "x"
    for _ in range(480):  # past what a recursive walk of the request survives
        deep = [deep]
    more = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "2"}]
    body = {**base, "system": [{"type": "text", "text": "s", "extra": deep}], "messages": [*base["messages"], *more]}
    fake.queue_reply("fine")
    assert post(live_server, body, h).status_code == 200  # post() asserts the recorder settles


@pytest.mark.parametrize("named", [True, False], ids=["ctxweb-session", "hashed-start"])
def test_two_first_requests_of_a_conversation_at_once_both_go_through_into_one_session(
    live_server, team, fake, monkeypatch, named
):
    found, barrier = proxy.sessions.conversation_session, threading.Barrier(2, timeout=5)

    def racing(project: Any, key: str) -> Any:  # both look before either made the session
        result = found(project, key)
        if result is None and threading.current_thread().name.startswith("first-request"):
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
        return result

    monkeypatch.setattr(proxy.sessions, "conversation_session", racing)
    h = {"ctxweb-api-key": team.bob.key, "x-api-key": "sk-ant-x", **({"ctxweb-session": "parallel"} if named else {})}
    body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "go"}]}
    answers: list[httpx2.Response] = []
    threads = [
        threading.Thread(target=lambda: answers.append(post(live_server, body, h)), name=f"first-request-{i}")
        for i in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert len(fake.requests_for("messages")) == 2
    (session,) = AgentSession.objects.filter(project=team.project)
    assert stored(session) == [("user", "go"), ("assistant", [{"type": "text", "text": DEFAULT_REPLY}])]


def answer(n: int, text: str) -> dict[str, Any]:
    return {"id": f"msg_{n}", "type": "message", "role": "assistant", "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 2}}  # fmt: skip


def test_a_rewritten_history_recorded_after_the_agent_moved_on_goes_into_one_fresh_session(team):
    """The agent compacted its own history (R1), then asked again at once (R2): both exchanges were
    begun on the old session; the recorder gets to them afterwards."""
    body0 = {"model": "m", "messages": [{"role": "user", "content": "original start"}]}
    session = proxy.proxy_session_for(user=team.bob.user, project=team.project, key="K", body=body0)
    record = {"session_id": session.pk, "complete": True, "key": "K"}
    proxy.proxy_record_exchange(after_seq=1, pending=body0, message=answer(0, "a0"), **record)
    r1 = {"model": "m", "messages": [{"role": "user", "content": "summary of before; go on"}]}
    replied = {"role": "assistant", "content": [{"type": "text", "text": "r1"}]}
    r2 = {"model": "m", "messages": [*r1["messages"], replied, {"role": "user", "content": "next"}]}
    proxy.proxy_record_exchange(after_seq=1, pending=r1, message=answer(1, "r1"), **record)
    proxy.proxy_record_exchange(after_seq=3, pending=r2, message=answer(2, "r2"), **record)
    current = AgentSession.objects.get(project=team.project, external_id="K")
    assert stored(current) == [(m["role"], m["content"]) for m in r2["messages"]] + [
        ("assistant", answer(2, "r2")["content"])
    ]
    old = AgentSession.objects.get(pk=session.pk)
    assert old.external_id == f"K@{old.pk}" and current.parent_id == old.pk
    assert AgentSession.objects.filter(project=team.project).count() == 2


def test_a_rewritten_history_through_a_recorder_that_is_behind(live_server, team, fake, monkeypatch):
    slow = proxy.exchanges.proxy_record_exchange

    def behind(**kwargs: Any) -> Any:
        time.sleep(0.3)
        return slow(**kwargs)

    monkeypatch.setattr(proxy.exchanges, "proxy_record_exchange", behind)  # where the recorder calls it
    h = {"ctxweb-api-key": team.bob.key, "x-api-key": "sk-ant-x", "ctxweb-session": "rw"}
    with httpx2.Client(timeout=30) as c:
        url = f"{live_server.url}/proxy/anthropic/v1/messages"
        for text, messages in (
            ("a0", [{"role": "user", "content": "original start"}]),
            ("r1", [{"role": "user", "content": "summary; go on"}]),
            ("r2", [{"role": "user", "content": "summary; go on"}, {"role": "assistant", "content": "r1"},
                    {"role": "user", "content": "next"}]),
        ):  # fmt: skip
            fake.queue_reply(text)
            c.post(url, json={"model": MODEL, "max_tokens": 5, "messages": messages}, headers=h)
    assert RECORDER.idle(10)
    current = AgentSession.objects.get(project=team.project, external_id="rw")
    assert current.message_count == 4 and AgentSession.objects.filter(project=team.project).count() == 2


@pytest.mark.parametrize("figure", [10**12, 10**400])
def test_an_absurd_usage_figure_is_not_believed(live_server, team, fake, caplog, figure):
    from django.core.cache import cache

    from sessions_app.selectors import usage

    cache.clear()
    ModelProfile.objects.update_or_create(name=MODEL, defaults={"context_window": 200_000, "max_output_tokens": 8_000})
    usage.forget_model_profiles()
    before = ModelProfile.objects.get(name=MODEL).calibration_factor
    h = {"ctxweb-api-key": team.bob.key, "x-api-key": "sk-ant-x", "ctxweb-session": "usage"}
    fake.queue_reply("ok", input_tokens=figure)
    post(live_server, {"model": MODEL, "max_tokens": 9, "messages": [{"role": "user", "content": "word " * 3000}]}, h)
    assert ModelProfile.objects.get(name=MODEL).calibration_factor == before
    session = AgentSession.objects.get(external_id="usage")
    assert session.exact_tokens is None and session.message_count == 2  # the messages, not the figure
    assert not [r for r in caplog.records if r.exc_info]
    (row,) = session.requests.all()  # its row: the figure counted only where a column holds it
    assert row.input_tokens == (figure if figure <= 10**9 else 0)


def test_the_providers_server_tool_blocks_are_recorded_as_they_came(live_server, team, fake):
    """Claude Code's WebSearch is Anthropic's web search tool: its blocks go round in the history."""
    h = {"ctxweb-api-key": team.bob.key, "x-api-key": "sk-ant-x", "ctxweb-session": "search"}
    searched = [
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "django 5.2"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
         "content": [{"type": "web_search_result", "url": "https://example.org", "encrypted_content": "e"}]},
        {"type": "text", "text": "found"},
    ]  # fmt: skip
    history = [{"role": "user", "content": "search the web"}, {"role": "assistant", "content": searched},
               {"role": "user", "content": "thanks"}]  # fmt: skip
    fake.queue_reply("welcome")
    assert (
        post(live_server, {"model": MODEL, "max_tokens": 9, "messages": history}, h).headers["ctxweb-recorded"] == "yes"
    )
    session = AgentSession.objects.get(external_id="search")
    assert stored(session)[:3] == [(m["role"], m["content"]) for m in history]


def test_a_gap_is_counted_under_its_own_caller_however_the_key_came(team, fake, client, monkeypatch, settings):
    from django.core.cache import cache
    from django.db import OperationalError

    from sessions_app.services import keys

    settings.CTX_PROXY_RECORDERS = 0  # this test's data lives in its transaction
    cache.clear()
    body = json.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    projects.project_upstream_key_set(project=team.project, api_key="sk-ant-alpha-key")
    real = keys.apikey_authenticate
    monkeypatch.setattr(keys, "apikey_authenticate", lambda raw: (_ for _ in ()).throw(OperationalError("down")))
    refused = client.post("/proxy/anthropic/v1/messages", data=body, content_type="application/json",
                          HTTP_X_API_KEY=team.mallory.key, HTTP_CTXWEB_SESSION="main")  # fmt: skip
    assert refused["ctxweb-recorded"] == "no"
    monkeypatch.setattr(keys, "apikey_authenticate", real)
    fake.queue_reply("hello")
    ok = client.post("/proxy/anthropic/v1/messages", data=body, content_type="application/json",
                     HTTP_X_API_KEY=team.bob.key, HTTP_CTXWEB_SESSION="main")  # fmt: skip
    assert ok["ctxweb-recorded"] == "yes"
    assert AgentSession.objects.get(project=team.project, external_id="main").unrecorded_requests == 0


def test_a_message_the_session_cannot_hold_becomes_a_note_and_the_conversation_goes_on(live_server, team, fake):
    """A block the session can't hold (a text block whose text is a number): the conversation is not stuck."""
    from sessions_app.selectors import usage

    h = {"ctxweb-api-key": team.bob.key, "x-api-key": "sk-ant-x", "ctxweb-session": "odd"}
    odd = {"role": "assistant", "content": [{"type": "text", "text": 5}, {"type": "text", "text": "seen"}]}
    history: list[dict[str, Any]] = [{"role": "user", "content": "look"}, odd]
    for n in range(3):
        history.append({"role": "user", "content": f"turn {n}"})
        fake.queue_reply(f"reply {n}")
        post(live_server, {"model": MODEL, "max_tokens": 9, "messages": history}, h)
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"reply {n}"}]})
    session = AgentSession.objects.get(external_id="odd")
    rows = stored(session)
    assert len(rows) == len(history)  # every place taken, each once
    assert rows[1][0] == "assistant" and "could not be stored" in json.dumps(rows[1][1])
    assert [r for i, r in enumerate(rows) if i != 1] == [
        (m["role"], m["content"]) for i, m in enumerate(history) if i != 1
    ]
    assert session.rejected_count == 1
    assert any("could not be stored" in w for w in usage.session_status(session)["warnings"])
