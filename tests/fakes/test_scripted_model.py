"""The scripted model: whole turns through the fake, streamed as the API streams them, and the
requests the real Claude Code CLI sent it (the fixtures), replayed without npm."""

from __future__ import annotations

import itertools
import json

import anthropic
from hypothesis import given
from hypothesis import strategies as st

from tests.clients.claude_code import CONTENT, FIXTURES, VERSION, load_fixtures
from tests.hypothesis_budget import ENGINE, SERVER

from . import fixtures as _fixtures
from .anthropic_server import FakeAnthropic, stream_events
from .scripted_model import (
    SIDE_REPLY,
    ResumingModel,
    ScriptedModel,
    assistant_turns,
    file_writing_task,
    reading_task,
    text,
    thinking,
    tool_use,
)

fake_anthropic = _fixtures.fake_anthropic

words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=0, max_size=80)
blocks = st.one_of(
    words.map(thinking),
    words.filter(bool).map(text),
    st.tuples(st.sampled_from(["Bash", "Read", "Write"]), st.dictionaries(st.text(max_size=8), words, max_size=3),
              st.uuids()).map(lambda t: tool_use(t[0], t[1], key=str(t[2]))),
)  # fmt: skip
turns = st.lists(st.lists(blocks, min_size=1, max_size=4), min_size=1, max_size=4)


def _accumulate(events: list[tuple[str, dict]]) -> list[dict]:
    """The content a client rebuilds from the stream's deltas."""
    content: list[dict] = []
    partial: dict[int, str] = {}
    for name, data in events:
        if name == "content_block_start":
            content.append(dict(data["content_block"]))
        elif name == "content_block_delta":
            block, delta = content[data["index"]], data["delta"]
            kind = delta["type"]
            if kind == "text_delta":
                block["text"] += delta["text"]
            elif kind == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif kind == "signature_delta":
                block["signature"] += delta["signature"]
            else:
                partial[data["index"]] = partial.get(data["index"], "") + delta["partial_json"]
    for index, raw in partial.items():
        content[index]["input"] = json.loads(raw)
    return content


@ENGINE
@given(turn=st.lists(blocks, min_size=1, max_size=5))
def test_a_thought_streams_as_deltas_and_its_signature_and_reads_back_whole(turn):
    message = {"usage": {"input_tokens": 1, "output_tokens": 1}, "content": turn, "stop_reason": "end_turn"}
    events = stream_events(message)
    thoughts = [b for b in turn if b["type"] == "thinking"]
    opened = [d["content_block"] for n, d in events if n == "content_block_start"]
    starts = [b for b in opened if b["type"] == "thinking"]
    assert all(s["thinking"] == "" and s["signature"] == "" for s in starts)  # the API opens a thought empty
    signatures = [d for n, d in events if n == "content_block_delta" and d["delta"]["type"] == "signature_delta"]
    assert len(signatures) == len(thoughts)
    assert _accumulate(events) == turn


@SERVER
@given(script=turns, asked=st.integers(0, 5))
def test_the_sdk_reads_the_scripted_turn_its_history_asks_for(script, asked):
    # A history with N assistant messages gets turn N, whole, through the real SDK's stream.
    history = [{"role": "user", "content": "go"}]
    for n in range(asked):
        history += [{"role": "assistant", "content": f"turn {n}"}, {"role": "user", "content": "next"}]
    with FakeAnthropic() as server, anthropic.Anthropic(api_key="k", base_url=server.base_url, max_retries=0) as c:
        server.set_message_function(ScriptedModel(script, is_main=lambda body: True))
        with c.messages.stream(model="claude-haiku-4-5", max_tokens=64, messages=history) as stream:
            got = stream.get_final_message()
    expected = script[asked] if asked < len(script) else [text(ScriptedModel(script).final)]
    assert [b.model_dump(exclude_none=True) for b in got.content] == expected
    assert got.stop_reason == ("tool_use" if any(b["type"] == "tool_use" for b in expected) else "end_turn")


def test_a_queued_reply_goes_before_the_script(fake_anthropic):
    fake_anthropic.set_message_function(ScriptedModel([[text("scripted")]], is_main=lambda body: True))
    fake_anthropic.queue_reply("queued")
    with anthropic.Anthropic(api_key="k", base_url=fake_anthropic.base_url, max_retries=0) as c:
        ask = {"model": "claude-haiku-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
        assert [c.messages.create(**ask).content[0].text for _ in range(2)] == ["queued", "scripted"]


# --------------------------------------------------------------------- the real CLI's requests


def test_the_fixtures_are_a_real_run_of_the_pinned_cli():
    requests = load_fixtures()
    assert FIXTURES.name == f"claude_code_{VERSION}" and len(requests) == 5
    assert all(r["headers"]["user-agent"].startswith(f"claude-cli/{VERSION} ") for r in requests)


def test_the_scripted_model_answers_each_recorded_request_with_the_turn_the_cli_got_next():
    # Each request of the real run holds, as its newest assistant message, the turn the script gave the
    # request before it: the script is keyed on the history, so a replay answers exactly as the run did.
    requests = load_fixtures()
    script = file_writing_task("/work/project", content=CONTENT)
    model = ScriptedModel(script)
    for before, after in itertools.pairwise(requests):
        answer = model(before["body"])["content"]
        sent_back = [m for m in after["body"]["messages"] if m["role"] == "assistant"]
        assert assistant_turns(after["body"]) == assistant_turns(before["body"]) + 1
        assert _ids(sent_back[-1]["content"]) == _ids(answer) != []
    assert model(requests[-1]["body"])["content"] == [text(model.final)]
    assert model.side_requests == 0  # -p mode: no title or quota requests
    assert model({"model": "claude-haiku-4-5", "max_tokens": 512, "messages": []})["content"] == [text(SIDE_REPLY)]


def _ids(content: list[dict]) -> list[str]:
    return [b["id"] for b in content if b["type"] == "tool_use"]


def test_the_cli_sends_what_the_issue_says_it_sends():
    # What issue 28's identity and compaction work must read; a new pinned version that changes it shows here.
    requests = load_fixtures()
    bodies = [r["body"] for r in requests]
    assert {r["headers"]["anthropic-version"] for r in requests} == {"2023-06-01"}
    assert all("context-management-2025-06-27" in r["headers"]["anthropic-beta"] for r in requests)
    assert all(
        b["context_management"] == {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]} for b in bodies
    )
    assert all(b["system"][0]["text"].startswith("x-anthropic-billing-header: cc_version=") for b in bodies)
    assert all(json.loads(b["metadata"]["user_id"])["session_id"] == requests[0]["headers"]["x-claude-code-session-id"]
               for b in bodies)  # fmt: skip
    # cache_control sits on the newest message only, and moves with it
    for b in bodies:
        marked = [i for i, m in enumerate(b["messages"]) if isinstance(m["content"], list)
                  and any("cache_control" in blk for blk in m["content"])]  # fmt: skip
        assert marked == [len(b["messages"]) - 1]
    results = [blk for m in bodies[-1]["messages"] if isinstance(m["content"], list) for blk in m["content"]
               if blk["type"] == "tool_result"]  # fmt: skip
    assert any(isinstance(r["content"], list) and r["content"][0]["type"] == "tool_reference" for r in results)
    assert any(r.get("is_error") for r in results)
    assert max(len(json.dumps(r["content"])) for r in results) > 20_000


def test_the_cli_requests_pass_the_fakes_rules_for_thinking_and_context_management():
    from .anthropic_rules import check_thinking, edits_of

    for request in load_fixtures():
        check_thinking(request["body"])  # raises what the real API would refuse
        assert [e["type"] for e in edits_of(request["body"])] == ["clear_thinking_20251015"]


def test_the_resuming_model_goes_on_from_the_newest_answered_call_in_a_compacted_history():
    script = reading_task("/w", ["a.txt", "b.txt", "c.txt"], content="done\n")
    model = ResumingModel(script)
    main = {"model": "m", "max_tokens": 32_000, "tools": [{"name": "Write"}]}
    read_b = next(b for b in script[2] if b["type"] == "tool_use")
    assert model({**main, "messages": [{"role": "user", "content": "go"}]})["content"] == script[0]
    result = {"type": "tool_result", "tool_use_id": read_b["id"], "content": "b"}
    compacted = [{"role": "user", "content": "<context_summary>…</context_summary>"},
                 {"role": "assistant", "content": [read_b]}, {"role": "user", "content": [result]}]  # fmt: skip
    assert model({**main, "messages": compacted})["content"] == script[3]  # though it holds one assistant message
    as_text = [{"role": "user", "content": [text(f"[tool result for {read_b['id']}]\nb")]}]
    assert model({**main, "messages": as_text})["content"] == script[3]  # a result written out as text
    assert sum(1 for turn in script if turn[0]["type"] == "thinking") == 3  # the start, every third read, the write
