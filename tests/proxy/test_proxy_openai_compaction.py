"""Transparent compaction on OpenAI's Chat Completions (``/proxy/openai/v1/chat/completions``), through
the official ``openai`` SDK against the fake OpenAI server: with the project's ``proxy_compaction`` on,
a long tool-using loop goes upstream as the session's compacted context in OpenAI's shape (the
caller's system prompt first, every call with its result, the caller's other fields kept), never over
the window, while the agent keeps its own history; a request refused as too long is compacted and
sent once more before the caller sees the refusal."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from compaction.context import SUMMARY_OPEN
from sessions_app.models import AgentSession, ModelProfile
from sessions_app.selectors import usage
from tests.fakes.openai_server import FakeOpenAI, count_tokens_for
from tests.proxy.test_proxy_wire import assert_chat_valid

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "tiny-window-gpt"
WINDOW = 8_000
TURNS = 100
CALLER_KEY = "sk-callers-own-openai-key-0123456789"
SYSTEM = {"role": "system", "content": "You are a careful agent. Check modules when asked."}
CHECK = {"type": "object", "properties": {"module": {"type": "integer"}}}
TOOLS = [{"type": "function", "function": {"name": "check", "description": "Check a module", "parameters": CHECK}}]


@pytest.fixture
def fake(settings: Any) -> Any:
    with FakeOpenAI() as server:
        settings.CTX_PROXY_OPENAI_URL = server.base_url
        yield server


def agent(proxy_openai_sdk: Any, team: Any, session: str) -> openai.OpenAI:
    return proxy_openai_sdk({"ctxweb-api-key": team.bob.key, "ctxweb-session": session}, api_key=CALLER_KEY)


def ask(client: openai.OpenAI, *, stream: bool, **kwargs: Any) -> tuple[dict[str, Any], Any]:
    """The model's message as an agent keeps it in its history, and the answer's headers. The history
    goes as the request's body (``extra_body``): the SDK walks typed ``messages`` one by one, which
    costs more than the whole exchange once it holds hundreds of them."""
    kwargs = {**kwargs, "messages": [], "extra_body": {"messages": kwargs["messages"]}}
    if not stream:
        raw = client.chat.completions.with_raw_response.create(**kwargs)
        message = raw.parse().choices[0].message
        return message.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}), raw.headers
    raw = client.chat.completions.with_raw_response.create(
        **kwargs, stream=True, stream_options={"include_usage": True}
    )
    pieces: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    for chunk in raw.parse():
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            for call in choice.delta.tool_calls or []:
                known = calls.setdefault(call.index, {"id": call.id, "name": None, "arguments": ""})
                known["name"] = (call.function and call.function.name) or known["name"]
                known["arguments"] += (call.function and call.function.arguments) or ""
    said: dict[str, Any] = {"role": "assistant", "content": "".join(pieces)}
    if calls:
        said["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for _, c in sorted(calls.items())
        ]
    return said, raw.headers


def tool_output(n: int) -> str:
    return "\n".join(f"src/module_{n}.py:{i}: checked value {i * n} ok" for i in range(30))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("stream", "workers"), [(False, "in-process"), (True, "busy")], ids=["plain-in-process", "streamed-busy"]
)
def test_a_hundred_turn_loop_never_sends_a_request_over_the_window(
    proxy_openai_sdk, team, fake, small_window, monkeypatch, stream, workers
):
    if workers == "busy":  # the queued compactions reach no worker: the proxy must run them itself
        from sessions_app import tasks

        monkeypatch.setattr(tasks, "compaction_send", lambda compaction_id: None)
    fake.set_context_window(WINDOW)  # the upstream refuses a request over the window, as OpenAI does
    client = agent(proxy_openai_sdk, team, "long-run")
    settings = {"model": MODEL, "tools": TOOLS, "temperature": 0.2}
    history: list[dict[str, Any]] = [SYSTEM]
    compacted, lasts = 0, []
    for n in range(TURNS):
        history.append({"role": "user", "content": f"Step {n}: check module {n} and tell me what you find."})
        fake.queue_message(None, tool_calls=[{"id": f"call_{n}", "name": "check", "arguments": f'{{"module": {n}}}'}])
        said, _ = ask(client, stream=stream, messages=history, **settings)
        assert said["tool_calls"][0]["id"] == f"call_{n}"
        history += [said, {"role": "tool", "tool_call_id": f"call_{n}", "content": tool_output(n)}]
        fake.queue_reply(f"Module {n} is fine.")
        lasts += [history[-3], history[-1]]
        said, headers = ask(client, stream=stream, messages=history, **settings)
        assert said["content"] == f"Module {n} is fine."  # the agent's replies arrive
        history.append(said)
        compacted += "ctxweb-compacted" in headers
    sent = fake.requests
    assert [r["status"] for r in sent] == [200] * 2 * TURNS  # nothing refused, nothing retried
    assert max(count_tokens_for(r["body"]) for r in sent) <= WINDOW  # never a request over the window
    assert count_tokens_for({"messages": history, "tools": TOOLS}) > 3 * WINDOW  # though the history is far past it
    assert compacted > TURNS / 2
    assert any(SUMMARY_OPEN in json.dumps(r["body"]["messages"]) for r in sent)  # the checkpoint's summary went
    for request, last in zip(sent, lasts, strict=True):  # each one the API takes, the caller's fields as they came
        body = request["body"]
        assert_chat_valid(body["messages"])
        assert body["messages"][0] == SYSTEM and body["messages"][-1] == last
        assert {k: body.get(k) for k in settings} == settings and body.get("stream", False) is stream
        if stream:
            assert body["stream_options"] == {"include_usage": True}
    # The agent's own history was never touched: the session holds every message it sent, once.
    session = AgentSession.objects.get(external_id="long-run")
    assert session.message_count == len(history) - 1  # its system prompt is the session's


def long_history() -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [SYSTEM]
    for n in range(12):
        history.append({"role": "user", "content": f"Step {n}: check module {n}.\n{tool_output(n)}"})
        history.append({"role": "assistant", "content": f"Checked {n}."})
    return [*history, {"role": "user", "content": "Go on."}]


REFUSALS = {
    # Chat Completions' wording, its figures (the window is taught), and its code.
    "figures": (
        "This model's maximum context length is 3000 tokens. However, your messages resulted in 5000 tokens. "
        "Please reduce the length of the messages.",
        "context_length_exceeded",
        3000,
    ),
    # The Responses API's wording: no figures, the code alone says it.
    "code-only": (
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        "context_length_exceeded",
        None,
    ),
}


@pytest.mark.parametrize("refusal", sorted(REFUSALS))
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_request_refused_as_too_long_is_compacted_and_sent_once_more(
    proxy_openai_sdk, team, fake, small_window, stream, refusal
):
    ModelProfile.objects.filter(name=MODEL).update(context_window=12_000)  # no compaction of ctxweb's own
    usage.forget_model_profiles()
    client = agent(proxy_openai_sdk, team, "too-long")
    history = long_history()
    message, code, window = REFUSALS[refusal]
    fake.queue_error(400, message, code=code)
    fake.queue_reply("Going on.")
    said, headers = ask(client, stream=stream, model=MODEL, messages=history)
    assert said["content"] == "Going on."  # the caller never saw the refusal
    refused, sent = fake.requests[-2:]
    assert refused["status"] == 400 and refused["body"]["messages"] == history
    assert sent["status"] == 200 and count_tokens_for(sent["body"]) < count_tokens_for(refused["body"]) / 2
    assert sent["body"]["messages"][0] == SYSTEM and sent["body"]["messages"][-1] == history[-1]
    assert_chat_valid(sent["body"]["messages"])
    session = AgentSession.objects.get(external_id="too-long")
    assert headers["ctxweb-compacted"] == str(session.compactions.get().pk)
    assert session.compactions.get().status == "succeeded"
    # The window the refusal named; else, the most it can be: the request's size by ctxweb's count.
    assert session.context_window_learnt == window or (window is None and session.context_window_learnt < 6_000)


@pytest.mark.parametrize(
    "error",
    [
        # A validation error that quotes the caller's text, a refusal of another kind, another status.
        (400, "Invalid 'messages[3]': This model's maximum context length is 3000 tokens.", None),
        (400, "Your input exceeds the context window of this model. Also, the tools are wrong.", "invalid_value"),
        (429, "Your input exceeds the context window of this model.", "context_length_exceeded"),
    ],
)
def test_any_other_error_reaches_the_caller_and_changes_nothing(proxy_openai_sdk, team, fake, small_window, error):
    client = agent(proxy_openai_sdk, team, "other-error")
    status, message, code = error
    fake.queue_error(status, message, code=code)
    with pytest.raises(openai.APIStatusError) as raised:
        client.chat.completions.create(model=MODEL, messages=long_history())
    assert raised.value.status_code == status and raised.value.body["message"] == message
    assert len(fake.requests) == 1  # not retried
    session = AgentSession.objects.get(external_id="other-error")
    assert not session.compactions.exists() and session.context_window_learnt is None
