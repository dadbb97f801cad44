"""Transparent compaction through the proxy: with the project's ``proxy_compaction`` on, the request
that goes upstream is the session's compacted context once a compaction has run, so a long agent
loop stays inside a small window while the agent keeps its own history; reverting the compactions
makes the next request carry the whole history again."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import pytest

from sessions_app.models import AgentSession, ModelProfile
from sessions_app.selectors import usage

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "tiny-window-model"
WINDOW = 8_000
TURNS = 100


def agent(proxy_sdk: Any, team: Any, session: str) -> anthropic.Anthropic:
    return proxy_sdk({"ctxweb-api-key": team.bob.key, "ctxweb-session": session})


def turn(n: int) -> list[dict[str, Any]]:
    """A user's request, the tool output that answers the model's call."""
    output = "\n".join(f"src/module_{n}.py:{i}: checked value {i * n} ok" for i in range(30))
    return [
        {"role": "user", "content": f"Step {n}: check module {n} and tell me what you find."},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": output}]},
    ]


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["in-process", "busy"])
def test_a_hundred_turn_loop_never_sends_a_request_over_the_window(
    proxy_sdk, team, fake, small_window, monkeypatch, workers
):
    if workers == "busy":  # the queued compactions reach no worker: the proxy must run them itself
        from sessions_app import tasks

        monkeypatch.setattr(tasks, "compaction_send", lambda compaction_id: None)
    client = agent(proxy_sdk, team, "long-run")
    history: list[dict[str, Any]] = []
    compacted = 0
    for n in range(TURNS):
        ask, result = turn(n)
        history.append(ask)
        fake.queue_message(
            [{"type": "tool_use", "id": f"toolu_{n}", "name": "Check", "input": {"module": n}}], stop_reason="tool_use"
        )
        first = client.messages.with_raw_response.create(model=MODEL, max_tokens=256, messages=history)
        history.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.parse().content]}
        )
        history.append(result)
        fake.queue_reply(f"Module {n} is fine.")
        second = client.messages.with_raw_response.create(model=MODEL, max_tokens=256, messages=history)
        assert second.parse().content[0].text == f"Module {n} is fine."  # the agent's replies arrive
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"Module {n} is fine."}]})
        compacted += "ctxweb-compacted" in second.headers
    sent = [r["body"] for r in fake.requests_for("messages")]
    sizes = [fake.count_tokens_for(body) for body in sent]
    assert max(sizes) <= WINDOW, max(sizes)  # never a request over the window
    assert fake.count_tokens_for({"messages": history}) > 3 * WINDOW  # though the agent's history is far past it
    assert compacted > TURNS / 2
    # The agent's own history was never touched: the session holds every message it sent, once.
    session = AgentSession.objects.get(external_id="long-run")
    assert session.message_count == len(history)


def test_reverting_the_compaction_makes_the_next_request_carry_the_whole_history(
    proxy_sdk, team, fake, small_window, api_as
):
    client = agent(proxy_sdk, team, "reverted-run")
    history: list[dict[str, Any]] = []
    for n in range(TURNS):
        history.append(turn(n)[0])
        fake.queue_reply(f"Noted {n}. " + "Looks fine. " * 40)
        answer = client.messages.with_raw_response.create(model=MODEL, max_tokens=256, messages=history)
        history.append({"role": "assistant", "content": [{"type": "text", "text": answer.parse().content[0].text}]})
        if "ctxweb-compacted" in answer.headers:
            compaction = int(answer.headers["ctxweb-compacted"])
            break
    else:
        pytest.fail("no compaction ran")
    assert fake.requests_for("messages")[-1]["body"]["messages"] != history[:-1]  # the compacted context went
    assert api_as(team.bob).post(f"/api/v1/compactions/{compaction}/revert/").status_code == 200
    history.append({"role": "user", "content": "Summarize what you found."})
    fake.queue_reply("All fine.")
    last = client.messages.with_raw_response.create(model=MODEL, max_tokens=256, messages=history)
    assert "ctxweb-compacted" not in last.headers
    assert fake.requests_for("messages")[-1]["body"]["messages"] == json.loads(json.dumps(history))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_request_refused_as_too_long_is_compacted_and_sent_once_more(proxy_sdk, team, fake, small_window, stream):
    ModelProfile.objects.filter(name=MODEL).update(context_window=400_000)  # no compaction of ctxweb's own
    usage.forget_model_profiles()
    client = agent(proxy_sdk, team, "too-long")
    history: list[dict[str, Any]] = []
    for n in range(12):
        ask, result = turn(n)
        history.append({"role": "user", "content": f"{ask['content']}\n{result['content'][0]['content']}"})
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"Checked {n}."}]})
    history.append({"role": "user", "content": "Go on."})
    fake.queue_error(400, message="prompt is too long: 5000 tokens > 3000 maximum")
    fake.queue_reply("Going on.")
    kwargs = {"model": MODEL, "max_tokens": 256, "messages": history}
    if stream:
        with client.messages.stream(**kwargs) as events:
            text = events.get_final_message().content[0].text
    else:
        text = client.messages.create(**kwargs).content[0].text
    assert text == "Going on."  # the caller never saw the refusal
    refused, sent = fake.requests_for("messages")[-2:]
    assert refused["status"] == 400 and refused["body"]["messages"] == history
    assert sent["status"] == 200 and fake.count_tokens_for(sent["body"]) < fake.count_tokens_for(refused["body"]) / 2
    session = AgentSession.objects.get(external_id="too-long")
    assert session.compactions.get().status == "succeeded"
    assert session.context_window_learnt == 3000 and session.context_window_override is None  # the refusal named it
