"""ctxweb's transparent compaction composes with the client's own ``context_management``: with
``proxy_compaction`` on, a request whose edits clear thinking or tool results still goes upstream as the
session's compacted context, its edits as the client sent them; one that asks the provider to compact
(``compact_*``) goes as it came. Whatever the agent's loop and its edits, every request the upstream
gets is one the real API takes (the fake checks thinking and edits as it does) and, when ctxweb
compacts, fits the model's window (the fake refuses one that does not)."""

from __future__ import annotations

import itertools
import json
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sessions_app.models import ModelProfile
from sessions_app.selectors import usage
from tests.fakes.scripted_model import text, thinking, tool_use
from tests.hypothesis_budget import SERVER

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

MODEL = "tiny-thinking-model"
WINDOW = 8_000
THINKING = {"type": "enabled", "budget_tokens": 1024}
CLEAR_THINKING_ALL = {"type": "clear_thinking_20251015", "keep": "all"}
COMPACT = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 150_000}}


clear_thinking = st.one_of(
    st.just(CLEAR_THINKING_ALL),
    st.integers(1, 3).map(
        lambda n: {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": n}}
    ),
)
clear_tool_uses = st.builds(
    lambda trigger, keep, excluded: {
        "type": "clear_tool_uses_20250919",
        "trigger": {"type": "input_tokens", "value": trigger},
        "keep": {"type": "tool_uses", "value": keep},
        **({"exclude_tools": ["Grep"]} if excluded else {}),
    },
    st.integers(1_000, 6_000),
    st.integers(1, 4),
    st.booleans(),
)
# What a client may ask of the provider: nothing, its clearing edits (thinking first), or a compaction.
managements = st.one_of(
    st.none(),
    st.tuples(clear_thinking).map(list),
    st.tuples(clear_tool_uses).map(list),
    st.tuples(clear_thinking, clear_tool_uses).map(list),
    st.just([COMPACT]),
).map(lambda edits: None if edits is None else {"edits": edits})


@st.composite
def loops(draw: Any, *, thinks: bool) -> list[list[dict[str, Any]]]:
    """A prompt's tool loop: each step the model's reply (a thought when thinking is on — always the
    first step's, as the API answers a turn — some text, one or two calls) and the sizes of their results."""
    steps = []
    for s in range(draw(st.integers(2, 7))):
        blocks = [thinking(f"Step {s}: what next.")] if thinks and (s == 0 or draw(st.booleans())) else []
        blocks += [text(f"Running step {s}.")] if draw(st.booleans()) else []
        calls = draw(st.integers(1, 2))
        steps.append([*blocks, *({"size": draw(st.integers(100, 900))} for _ in range(calls))])
    return steps


def call_of(block: dict[str, Any], key: str) -> dict[str, Any]:
    return tool_use("Grep" if block["size"] % 3 == 0 else "Bash", {"command": f"run {key}"}, key=key)


def output(key: str, size: int) -> str:
    return "\n".join(f"{key} line {i}: value {i * 7} checked" for i in range(size // 10))


@settings(SERVER)
@given(management=managements, thinks=st.booleans(), prompts=st.data())
def test_the_clients_edits_go_upstream_with_the_compacted_context_and_every_request_is_valid(
    proxy_sdk, team, fake, small_window, management, thinks, prompts
):
    edits = management["edits"] if management else []
    thinks = thinks or any(e["type"].startswith("clear_thinking") for e in edits)  # the edit needs thinking
    provider_compacts = any(e["type"].startswith("compact") for e in edits)
    fake.reset()
    ModelProfile.objects.filter(name=MODEL).update(calibration_factor=1.0)  # each example learns its own
    usage.forget_model_profiles()
    fake.set_context_window(None if provider_compacts else WINDOW)
    client = proxy_sdk({"ctxweb-api-key": team.bob.key, "ctxweb-session": f"compose-{uuid.uuid4()}"})
    extra: dict[str, Any] = {"context_management": management} if management else {}
    history: list[dict[str, Any]] = []
    compacted: list[bool] = []
    for p in range(prompts.draw(st.integers(1, 2), label="prompts")):
        history.append({"role": "user", "content": f"Prompt {p}: check every module and report."})
        for s, step in enumerate([*prompts.draw(loops(thinks=thinks), label=f"loop {p}"), [text(f"Part {p} done.")]]):
            keys = (f"{p}-{s}-{c}" for c in itertools.count())
            reply = [call_of(b, next(keys)) if "size" in b else b for b in step]
            fake.queue_message(reply)
            answer = client.messages.with_raw_response.create(
                model=MODEL, max_tokens=256, messages=history, extra_body=extra,
                **({"thinking": THINKING} if thinks else {}),
            )  # fmt: skip
            compacted.append("ctxweb-compacted" in answer.headers)
            history.append(
                {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in answer.parse().content]}
            )
            sizes = [b["size"] for b in step if "size" in b]
            results = [{"type": "tool_result", "tool_use_id": r["id"], "content": output(r["id"], n)}
                       for r, n in zip([b for b in reply if b["type"] == "tool_use"], sizes, strict=True)]  # fmt: skip
            if results:
                history.append({"role": "user", "content": results})

    sent = fake.requests_for("messages")
    assert [r["status"] for r in sent] == [200] * len(sent)  # the API's rules held: nothing was refused
    assert len(sent) == len(compacted)  # and no refusal as too long was retried
    for request in sent:
        body = request["body"]
        assert body.get("context_management") == management  # the client's edits, verbatim
        assert body.get("thinking") == (THINKING if thinks else None)
    if provider_compacts:  # left to the provider: the agent's own history, as it came
        assert not any(compacted)
        assert sent[-1]["body"]["messages"] == json.loads(json.dumps(history[:-1]))
    else:
        assert max(fake.count_tokens_for(r["body"]) for r in sent) <= WINDOW
        if fake.count_tokens_for({"messages": history}) > 2 * WINDOW:
            assert any(compacted)
