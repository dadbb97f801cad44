"""Transparent compaction on OpenAI's Responses API (``/proxy/openai/v1/responses``), through the
official ``openai`` SDK against the fake Responses API: with ``proxy_compaction`` on, a long
tool-using loop goes upstream as the session's compacted context as items (the caller's developer
message first, every call followed by its output, reasoning before what it led to, the caller's
other fields kept), never over the window, while the agent keeps its own history; a request refused
as too long is compacted and sent once more before the caller sees the refusal."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from compaction.context import SUMMARY_OPEN
from sessions_app.models import Compaction
from tests.fakes.openai_responses import count_input_tokens, function_call, message, reasoning
from tests.fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "tiny-window-gpt"
WINDOW = 8_000
TURNS = 100
CALLER_KEY = "sk-callers-own-openai-key-0123456789"
DEVELOPER = {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Check modules."}]}
TOOLS = [{"type": "function", "name": "check", "description": "Check a module",
          "parameters": {"type": "object", "properties": {"module": {"type": "integer"}}}}]  # fmt: skip


@pytest.fixture
def fake(settings: Any) -> Any:
    with FakeOpenAI() as server:
        settings.CTX_PROXY_OPENAI_URL = server.base_url
        yield server


def ask(client: openai.OpenAI, *, stream: bool, **kwargs: Any) -> tuple[list[dict[str, Any]], Any]:
    """The response's output items as the agent keeps them, and the answer's headers. The history goes
    as the request's body (``extra_body``): the SDK walks a typed ``input`` item by item, which costs
    more than the whole exchange once it holds hundreds of items."""
    kwargs = {**kwargs, "input": [], "extra_body": {"input": kwargs["input"]}}
    if stream:
        raw = client.responses.with_raw_response.create(**kwargs, stream=True)
        done = [e.response for e in raw.parse() if e.type == "response.completed"]
        return [i.model_dump(exclude_none=True) for i in done[0].output], raw.headers
    raw = client.responses.with_raw_response.create(**kwargs)
    return [i.model_dump(exclude_none=True) for i in raw.parse().output], raw.headers


def assert_items_valid(items: list[dict[str, Any]]) -> None:
    """What the API takes: every output answers a call made before it, every call is answered, a
    reasoning item is followed by another item of the model's."""
    calls = [i["call_id"] for i in items if i.get("type") in ("function_call", "custom_tool_call")]
    outputs = [i["call_id"] for i in items if i.get("type") in ("function_call_output", "custom_tool_call_output")]
    assert sorted(calls) == sorted(outputs)
    for n, item in enumerate(items):
        if item.get("type", "").endswith("_output"):
            assert any(i.get("call_id") == item["call_id"] for i in items[:n] if not i["type"].endswith("_output"))
        if item.get("type") == "reasoning":
            assert n + 1 < len(items) and items[n + 1].get("role") not in ("user", "developer")


def tool_output(n: int) -> str:
    return "\n".join(f"src/module_{n}.py:{i}: checked value {i * n} ok" for i in range(30))


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_hundred_turn_loop_never_sends_a_request_over_the_window(proxy_openai_sdk, team, fake, small_window, stream):
    fake.responses.context_window = WINDOW  # the upstream refuses an input over the window, as OpenAI does
    client = proxy_openai_sdk({"ctxweb-api-key": team.bob.key, "ctxweb-session": "long-run"}, api_key=CALLER_KEY)
    settings = {"model": MODEL, "tools": TOOLS, "store": False, "include": ["reasoning.encrypted_content"]}
    history: list[dict[str, Any]] = [DEVELOPER]
    compacted = 0
    for n in range(TURNS):
        history.append(
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"Check module {n}."}]}
        )
        fake.responses.queue_reply(
            [reasoning(f"Module {n} next."), function_call("check", {"module": n}, call_id=f"call_{n}")]
        )
        output, _ = ask(client, stream=stream, input=history, **settings)
        assert output[-1]["call_id"] == f"call_{n}"
        history += [*output, {"type": "function_call_output", "call_id": f"call_{n}", "output": tool_output(n)}]
        fake.responses.queue_reply([message(f"Module {n} is fine.")])
        output, headers = ask(client, stream=stream, input=history, **settings)
        assert output[0]["content"][0]["text"] == f"Module {n} is fine."  # the agent's replies arrive
        history += output
        compacted += "ctxweb-compacted" in headers
    sent = [r["body"] for r in fake.requests if r["path"].endswith("/v1/responses")]
    assert len(sent) == 2 * TURNS  # nothing refused and sent again
    assert max(count_input_tokens(b) for b in sent) <= WINDOW  # never an input over the window
    assert count_input_tokens({"input": history, "tools": TOOLS}) > 3 * WINDOW  # though the history is far past it
    assert compacted > TURNS / 2
    assert any(SUMMARY_OPEN in json.dumps(b["input"]) for b in sent)  # the checkpoint's summary went
    for body in sent:  # each one the API takes, the caller's fields and developer message as they came
        assert body["input"][0] == DEVELOPER and body["tools"] == TOOLS and body["store"] is False
        assert_items_valid(body["input"])


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_request_refused_as_too_long_is_compacted_and_sent_again(proxy_openai_sdk, team, fake, small_window, stream):
    client = proxy_openai_sdk({"ctxweb-api-key": team.bob.key, "ctxweb-session": "refused"}, api_key=CALLER_KEY)
    history: list[dict[str, Any]] = [DEVELOPER]
    for n in range(20):  # a history the session holds (most of the window), before the upstream refuses one
        history.append(
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"Check module {n}."}]}
        )
        fake.responses.queue_reply([function_call("check", {"module": n}, call_id=f"call_{n}")])
        output, _ = ask(client, stream=False, input=history, model=MODEL, tools=TOOLS)
        history += [*output, {"type": "function_call_output", "call_id": f"call_{n}", "output": tool_output(n)}]
    fake.responses.queue_error(
        400,
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
        code="context_length_exceeded",
    )
    fake.responses.queue_reply([message("Done.")])
    output, headers = ask(client, stream=stream, input=history, model=MODEL, tools=TOOLS)
    assert output[0]["content"][0]["text"] == "Done."  # the caller never saw the refusal
    assert "ctxweb-compacted" in headers
    retried = fake.requests[-1]["body"]
    assert count_input_tokens(retried) < count_input_tokens(fake.requests[-2]["body"])
    assert_items_valid(retried["input"])
    assert Compaction.objects.filter(session__external_id="refused", status="succeeded").exists()
