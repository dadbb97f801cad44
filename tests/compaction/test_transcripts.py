"""Transcript readers: Claude Code JSONL, OpenAI chat JSON (plain, SWE-agent, tau-bench), Anthropic requests."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from compaction.messages import normalize_message
from compaction.transcripts import (
    FORMATS,
    ClaudeCodeReader,
    Conversation,
    TranscriptError,
    UsagePoint,
    read_transcript,
)
from tests.shared_data import SHARED_DATA

DATA = SHARED_DATA
CLAUDE_FILES = sorted(p.name for p in (DATA / "claude_code").glob("*.jsonl")) or ["<shared data missing>"]
OPENAI_FILES = sorted(p.name for p in (DATA / "openai").glob("*") if not p.name.startswith("LICENSE")) or [
    "<shared data missing>"
]

# ----------------------------------------------------------------------------- builders

SESSION = "sess-1"


def _line(kind: str, uuid: str | None, parent: str | None, **extra: Any) -> str:
    event: dict[str, Any] = {
        "type": kind,
        "parentUuid": parent,
        "isSidechain": False,
        "sessionId": SESSION,
        "timestamp": "2026-01-02T03:04:05.000Z",
    }
    if uuid is not None:
        event["uuid"] = uuid
    event.update(extra)
    return json.dumps(event)


def user(uuid: str, content: Any, parent: str | None = None, **extra: Any) -> str:
    return _line("user", uuid, parent, message={"role": "user", "content": content}, **extra)


def assistant(
    uuid: str,
    mid: str,
    blocks: list[dict[str, Any]],
    parent: str | None = None,
    *,
    usage: dict[str, int] | None = None,
    model: str = "claude-opus-4-5",
    **extra: Any,
) -> str:
    body = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": blocks,
        "stop_reason": None,
        "usage": usage
        or {"input_tokens": 3, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000, "output_tokens": 7},
    }
    return _line("assistant", uuid, parent, message=body, requestId=f"req-{mid}", **extra)


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def call(tid: str, name: str = "Bash") -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": {"command": "ls"}}


def result(tid: str, content: Any = "ok", **extra: Any) -> list[dict[str, Any]]:
    return [{"type": "tool_result", "tool_use_id": tid, "content": content, **extra}]


def claude(lines: list[str]) -> Any:
    return read_transcript("\n".join(lines) + "\n", "claude-code")


def roles_and_kinds(conv: Conversation) -> list[tuple[str, Any]]:
    out = []
    for m in conv.messages:
        c = m["content"]
        out.append((m["role"], c if isinstance(c, str) else [b["type"] for b in c]))
    return out


# ----------------------------------------------------------------------------- Claude Code: grouping


def test_split_assistant_lines_are_regrouped_into_one_message() -> None:
    t = claude(
        [
            user("u1", "list files"),
            assistant("a1", "msg_A", [text("Let me look.")], "u1"),
            assistant(
                "a2",
                "msg_A",
                [call("t1")],
                "a1",
                usage={
                    "input_tokens": 5,
                    "cache_creation_input_tokens": 10,
                    "cache_read_input_tokens": 20,
                    "output_tokens": 40,
                },
            ),
            user("u2", result("t1"), "a2"),
            assistant("a3", "msg_B", [text("Done.")], "u2"),
        ]
    )
    conv = t.main
    assert conv is not None and conv.key == "main" and not conv.sidechain
    assert roles_and_kinds(conv) == [
        ("user", "list files"),
        ("assistant", ["text", "tool_use"]),
        ("user", ["tool_result"]),
        ("assistant", ["text"]),
    ]
    grouped = conv.messages[1]
    assert grouped["client_id"] == "msg_A"
    assert grouped["content"][0] == {"type": "text", "text": "Let me look."}
    assert grouped["content"][1] == {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    assert grouped["created_at"] == "2026-01-02T03:04:05.000Z"
    assert grouped["metadata"]["uuid"] == "a1"
    assert grouped["metadata"]["model"] == "claude-opus-4-5"
    assert grouped["metadata"]["request_id"] == "req-msg_A"
    assert [m["client_id"] for m in conv.messages] == ["u1", "msg_A", "u2", "msg_B"]
    # the usage of the group is its last line's: the streamed lines carry a growing output count
    assert conv.usage_points[0] == UsagePoint(
        message_index=1, context_tokens=35, output_tokens=40, request_id="req-msg_A"
    )
    assert conv.model == "claude-opus-4-5"
    assert conv.external_id == SESSION
    assert t.skipped == {}


def test_tool_results_arriving_inside_a_response_wait_behind_it() -> None:
    # Newer Claude Code runs a tool while the response still streams: result lines interleave.
    conv = claude(
        [
            user("u1", "go"),
            assistant("a1", "msg_A", [call("t1")], "u1"),
            _line("progress", "p1", "a1", data={}),
            user("r1", result("t1"), "p1"),
            assistant("a2", "msg_A", [call("t2")], "r1"),
            user("r2", result("t2"), "a2"),
            assistant("a3", "msg_B", [text("both done")], "r2"),
        ]
    ).main
    assert roles_and_kinds(conv) == [
        ("user", "go"),
        ("assistant", ["tool_use", "tool_use"]),
        ("user", ["tool_result"]),
        ("user", ["tool_result"]),
        ("assistant", ["text"]),
    ]
    assert [m["client_id"] for m in conv.messages] == ["u1", "msg_A", "r1", "r2", "msg_B"]


def test_a_prompt_closes_the_group_and_a_reused_message_id_gets_a_fresh_client_id() -> None:
    conv = claude(
        [
            user("u1", "hi"),
            assistant("a1", "msg_A", [text("one")], "u1"),
            user("u2", "[Request interrupted by user]", "a1"),
            assistant("a2", "msg_A", [text("two")], "u2"),
        ]
    ).main
    assert roles_and_kinds(conv) == [
        ("user", "hi"),
        ("assistant", ["text"]),
        ("user", "[Request interrupted by user]"),
        ("assistant", ["text"]),
    ]
    assert [m["client_id"] for m in conv.messages] == ["u1", "msg_A", "u2", "msg_A#2"]
    assert len(conv.usage_points) == 1  # one distinct response


def test_rewound_branches_are_kept_in_file_order() -> None:
    conv = claude(
        [
            user("u1", "first"),
            assistant("a1", "msg_A", [text("answer A")], "u1"),
            user("u2", "abandoned branch", "a1"),
            assistant("a2", "msg_B", [text("answer B")], "u2"),
            user("u3", "rewound: new branch from a1", "a1"),
            assistant("a3", "msg_C", [text("answer C")], "u3"),
        ]
    ).main
    assert [m["client_id"] for m in conv.messages] == ["u1", "msg_A", "u2", "msg_B", "u3", "msg_C"]
    assert conv.messages[4]["metadata"]["parent_uuid"] == "a1"


def test_duplicate_line_uuid_is_skipped() -> None:
    line = user("u1", "hello")
    t = claude([line, line, assistant("a1", "msg_A", [text("hi")], "u1")])
    assert len(t.main.messages) == 2
    assert t.skipped == {"duplicate": 1}


# ----------------------------------------------------------------------------- Claude Code: sidechains


def test_sidechain_chains_are_kept_apart_from_main_and_from_each_other() -> None:
    t = claude(
        [
            user("m1", "orchestrate"),
            assistant("m2", "msg_M", [call("task1", "Task")], "m1"),
            assistant("m3", "msg_M", [call("task2", "Task")], "m2"),
            # first sub-agent (v1.0.x writes it into the same file, root has no parent)
            user("s1", "explore package.json", None, isSidechain=True),
            assistant("s2", "msg_S1", [call("st1", "Read")], "s1", isSidechain=True),
            user("s3", result("st1"), "s2", isSidechain=True),
            # second sub-agent starts while the first is still going
            user("x1", "analyse structure", None, isSidechain=True),
            assistant("s4", "msg_S2", [text("package summary")], "s3", isSidechain=True),
            assistant("x2", "msg_X", [text("structure summary")], "x1", isSidechain=True),
            user("m4", result("task1", "package summary"), "m3"),
            user("m5", result("task2", "structure summary"), "m4"),
            assistant("m6", "msg_N", [text("all done")], "m5"),
        ]
    )
    assert [c.key for c in t.conversations] == ["main", "sidechain-1", "sidechain-2"]
    main, side1, side2 = t.conversations
    assert t.main is main
    assert not main.sidechain and side1.sidechain and side2.sidechain
    assert [m["client_id"] for m in main.messages] == ["m1", "msg_M", "m4", "m5", "msg_N"]
    assert roles_and_kinds(main)[1] == ("assistant", ["tool_use", "tool_use"])  # not split by the sub-agents
    assert [m["client_id"] for m in side1.messages] == ["s1", "msg_S1", "s3", "msg_S2"]
    assert [m["client_id"] for m in side2.messages] == ["x1", "msg_X"]
    assert side1.external_id == f"{SESSION}:sidechain-1"
    assert [p.message_index for p in side1.usage_points] == [1, 3]


def test_sidechain_lines_linked_through_skipped_lines_stay_in_their_chain() -> None:
    conv = claude(
        [
            user("m1", "go"),
            user("s1", "sub task", None, isSidechain=True),
            _line("progress", "p1", "s1", isSidechain=True, data={}),
            assistant("s2", "msg_S", [text("sub answer")], "p1", isSidechain=True),
            assistant("m2", "msg_M", [text("main answer")], "m1"),
        ]
    )
    assert [c.key for c in conv.conversations] == ["main", "sidechain-1"]
    assert [m["client_id"] for m in conv.conversations[1].messages] == ["s1", "msg_S"]
    assert conv.skipped == {"progress": 1}


def test_a_sub_agent_file_is_its_own_main_conversation() -> None:
    t = claude(
        [
            user("s1", "Warmup", "parent-in-other-file", isSidechain=True, agentId="a123"),
            assistant("s2", "msg_S", [text("ready")], "s1", isSidechain=True, agentId="a123"),
        ]
    )
    assert [c.key for c in t.conversations] == ["main"]
    conv = t.main
    assert conv is not None and not conv.sidechain
    assert conv.metadata["agent_id"] == "a123"
    assert conv.external_id == f"{SESSION}:agent-a123"  # never the parent session's id
    assert len(conv.messages) == 2


# ----------------------------------------------------------------------------- Claude Code: skipping, robustness


def test_non_message_lines_are_skipped_and_counted_by_kind() -> None:
    t = claude(
        [
            json.dumps({"type": "summary", "summary": "Fix the flaky test", "leafUuid": "a1"}),
            json.dumps({"type": "file-history-snapshot", "messageId": "x", "snapshot": {}}),
            json.dumps({"type": "queue-operation", "operation": "enqueue"}),
            user("u1", "hello"),
            _line("system", "sys1", "u1", subtype="turn_duration", durationMs=5),
            _line("progress", "p1", "u1", data={"type": "hook_progress"}),
            _line("progress", "p2", "u1", data={"type": "hook_progress"}),
            '{"type": "assistant", "message": {"id": "msg_broken", "content": [',  # cut off mid-line
            "not json at all",
            "[1, 2, 3]",
            json.dumps({"type": "some-future-kind", "uuid": "f1"}),
            json.dumps({"uuid": "no-type"}),
            json.dumps({"type": "user", "uuid": "u-nomsg", "message": "not an object"}),
            "",
            "   ",
            assistant("a1", "msg_A", [text("hi")], "u1"),
        ]
    )
    assert t.skipped == {
        "summary": 1,
        "file-history-snapshot": 1,
        "queue-operation": 1,
        "system": 1,
        "progress": 2,
        "invalid_json": 2,
        "not_an_object": 1,
        "some-future-kind": 1,
        "unknown": 1,
        "user_without_message": 1,
    }
    assert [m["client_id"] for m in t.main.messages] == ["u1", "msg_A"]
    assert t.main.title == "Fix the flaky test"  # the summary whose leaf is in this conversation


def test_empty_or_blank_file_has_no_conversations() -> None:
    for data in (b"", "", "\n\n  \r\n", b"\xef\xbb\xbf"):
        t = read_transcript(data, "claude-code")
        assert t.conversations == [] and t.main is None and t.skipped == {}


def test_bom_and_crlf_read_like_plain_lines() -> None:
    lines = [user("u1", "héllo ✓"), assistant("a1", "msg_A", [text("hi")], "u1")]
    plain = read_transcript("\n".join(lines), "claude-code")
    crlf = read_transcript(("\ufeff" + "\r\n".join(lines) + "\r\n").encode(), "claude-code")
    assert crlf.conversations == plain.conversations
    assert crlf.main is not None
    assert crlf.main.messages[0]["content"] == "héllo ✓"


def test_line_separator_inside_a_json_string_does_not_split_the_line() -> None:
    # JSON allows a raw U+2028 inside strings; str.splitlines() would cut the line there.
    t = claude([user("u1", "before\u2028after"), assistant("a1", "msg_A", [text("x")], "u1")])
    assert t.main.messages[0]["content"] == "before\u2028after"
    assert t.skipped == {}


def test_blocks_are_kept_not_dropped() -> None:
    conv = claude(
        [
            user(
                "u1",
                [
                    text("look"),
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}},
                ],
            ),
            assistant("a1", "msg_A", [{"type": "thinking", "thinking": "hmm", "signature": "sig"}], "u1"),
            assistant("a2", "msg_A", [{"type": "redacted_thinking", "data": "opaque"}], "a1"),
            assistant(
                "a3", "msg_A", [{"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}], "a2"
            ),
            assistant("a4", "msg_A", [call("t1"), call("t2")], "a3"),
            user(
                "u2",
                result(
                    "t1", [text("line"), {"type": "image", "source": {"type": "url", "url": "http://x"}}], is_error=True
                )
                + result("t2", None, is_error=False),
                "a4",
            ),
        ]
    ).main
    assert conv.messages[0]["content"][1]["type"] == "image"
    blocks = conv.messages[1]["content"]
    assert blocks[0] == {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    assert blocks[1] == {"type": "redacted_thinking", "data": "opaque"}
    assert blocks[2] == {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {}}  # as it came
    first, second = conv.messages[2]["content"]
    assert first == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "is_error": True,
        "content": [text("line"), {"type": "image", "source": {"type": "url", "url": "http://x"}}],
    }
    assert second == result("t2", None, is_error=False)[0]  # as it came


def test_blocks_a_message_can_hold_are_kept_as_they_came_their_cache_marks_aside() -> None:
    reference = {"type": "tool_reference", "tool_name": "TaskCreate"}
    marked = {"type": "text", "text": "see", "cache_control": {"type": "ephemeral"}}
    conv = claude(
        [
            user("u1", [marked, {"type": "future_block", "payload": [1, 2]}]),
            assistant("a1", "msg_A", [call("t1")], "u1"),
            user("u2", [{"type": "tool_result", "tool_use_id": "t1", "content": [reference], "is_error": False}], "a1"),
            assistant("a2", "msg_B", [{"type": "tool_use", "id": "t2", "name": "Bash", "input": '{"x": 1}'}], "u2"),
        ]
    ).main
    assert conv.messages[0]["content"] == [{"type": "text", "text": "see"}, {"type": "future_block", "payload": [1, 2]}]
    assert (
        conv.messages[2]["content"][0]["content"] == [reference] and conv.messages[2]["content"][0]["is_error"] is False
    )
    assert conv.messages[3]["content"][0]["input"] == {"x": 1}  # what can't be held as it came is made into what it can


def test_metadata_flags_usage_points_and_compaction_boundary() -> None:
    conv = claude(
        [
            user("u0", "<command-name>/clear</command-name>", isMeta=True),
            user("u1", "do it", "u0"),
            assistant(
                "a1",
                "msg_A",
                [text("working")],
                "u1",
                usage={
                    "input_tokens": 10,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 90,
                    "output_tokens": 5,
                },
            ),
            _line(
                "system",
                "b1",
                None,
                logicalParentUuid="a1",
                subtype="compact_boundary",
                compactMetadata={"trigger": "auto", "preTokens": 100},
            ),
            user("u2", "This session is being continued…", "b1", isCompactSummary=True),
            assistant(
                "a2",
                "msg_B",
                [text("continuing")],
                "u2",
                model="claude-sonnet-4-5",
                usage={
                    "input_tokens": 20,
                    "cache_creation_input_tokens": 30,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 6,
                },
            ),
            assistant(
                "a3",
                "msg_err",
                [text("API Error: overloaded")],
                "a2",
                model="<synthetic>",
                usage={
                    "input_tokens": 0,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": 0,
                },
                isApiErrorMessage=True,
            ),
        ]
    ).main
    assert conv.messages[0]["metadata"]["is_meta"] is True
    assert "is_meta" not in conv.messages[1]["metadata"]
    assert conv.segment_starts == [3]
    assert conv.boundary_facts == {3: {"trigger": "auto", "pre_tokens": 100}}
    assert conv.messages[3]["metadata"]["is_compact_summary"] is True
    assert conv.usage_points == [UsagePoint(2, 100, 5, "req-msg_A"), UsagePoint(4, 50, 6, "req-msg_B")]
    assert conv.messages[5]["metadata"]["is_api_error"] is True
    assert conv.model == "claude-sonnet-4-5"  # the latest real model, not "<synthetic>"
    for m in conv.messages:
        assert set(m) == {"role", "content", "client_id", "created_at", "metadata"}
        assert len(json.dumps(m["metadata"])) < 400  # small facts, not the whole line


# ----------------------------------------------------------------------------- Claude Code: incremental reading


FIXTURE_LINES = [
    json.dumps({"type": "summary", "summary": "t", "leafUuid": "nowhere"}),
    user("m1", "go"),
    assistant("m2", "msg_M", [text("plan")], "m1"),
    assistant("m3", "msg_M", [call("task1", "Task")], "m2"),
    user("s1", "sub", None, isSidechain=True),
    assistant("s2", "msg_S", [call("st1")], "s1", isSidechain=True),
    _line("progress", "p0", "s2", isSidechain=True, data={}),
    user("s3", result("st1"), "p0", isSidechain=True),
    assistant("s4", "msg_S", [call("st2")], "s3", isSidechain=True),
    user("s5", result("st2"), "s4", isSidechain=True),
    assistant("s6", "msg_S2", [text("sub done")], "s5", isSidechain=True),
    user("m4", result("task1", "sub done"), "m3"),
    "{broken",
    assistant("m5", "msg_N", [call("t9")], "m4"),
    user("m6", result("t9"), "m5"),
    _line("system", "b1", None, logicalParentUuid="m6", subtype="compact_boundary"),
    user("m7", "summary of before", "b1", isCompactSummary=True),
    assistant("m8", "msg_Z", [text("thinking out loud")], "m7"),
    assistant("m9", "msg_Z", [text("last words")], "m8"),
]


def _chunked(lines: list[str], rng: random.Random) -> list[list[str]]:
    chunks, i = [], 0
    while i < len(lines):
        size = rng.choice([0, 1, 1, 2, 3, 5, 8])
        chunks.append(lines[i : i + size])
        i += size
    return chunks


def _read_in_chunks(lines: list[str], rng: random.Random) -> tuple[list[tuple[str, dict]], ClaudeCodeReader]:
    reader = ClaudeCodeReader()
    emitted: list[tuple[str, dict]] = []
    for chunk in _chunked(lines, rng):
        emitted += reader.feed(chunk)
    emitted += reader.finish()
    return emitted, reader


def _assert_same_as_whole(lines: list[str], seeds: range) -> None:
    whole = read_transcript("\n".join(lines), "claude-code")
    expected = [(c.key, m) for c in whole.conversations for m in c.messages]
    for seed in seeds:
        emitted, reader = _read_in_chunks(lines, random.Random(seed))
        assert sorted(emitted, key=lambda e: e[0]) == sorted(expected, key=lambda e: e[0]), seed
        assert reader.conversations == whole.conversations, seed
        assert dict(reader.skipped) == whole.skipped, seed


def test_any_chunking_gives_the_same_messages_as_reading_whole() -> None:
    _assert_same_as_whole(FIXTURE_LINES, range(40))


def test_feed_returns_only_messages_that_are_final() -> None:
    reader = ClaudeCodeReader()
    assert [m["client_id"] for _, m in reader.feed(FIXTURE_LINES[:3])] == ["m1"]  # msg_M may still grow
    assert reader.feed(FIXTURE_LINES[3:4]) == []
    out = reader.feed(FIXTURE_LINES[4:12])  # the sub-agent runs; main's result waits behind msg_M
    assert [(k, m["client_id"]) for k, m in out] == [
        ("sidechain-1", "s1"),
        ("sidechain-1", "msg_S"),
        ("sidechain-1", "s3"),
        ("sidechain-1", "s5"),
    ]
    out = reader.feed(FIXTURE_LINES[12:14])  # a new response closes msg_M
    assert [(k, m["client_id"]) for k, m in out] == [("main", "msg_M"), ("main", "m4")]
    assert [c["type"] for c in out[0][1]["content"]] == ["text", "tool_use"]
    rest = reader.feed(FIXTURE_LINES[14:])
    assert ("main", "msg_Z") not in [(k, m["client_id"]) for k, m in rest]
    final = reader.finish()
    assert [(k, m["client_id"]) for k, m in final] == [("main", "msg_Z"), ("sidechain-1", "msg_S2")]
    assert [b["text"] for b in final[0][1]["content"]] == ["thinking out loud", "last words"]
    assert reader.skipped == Counter({"summary": 1, "progress": 1, "invalid_json": 1, "system": 1})
    main = reader.conversations[0]
    assert main.segment_starts == [5]
    assert main.messages[5]["client_id"] == "m7"


@pytest.mark.parametrize(
    ("meta", "facts"),
    [
        (None, {}),
        ("auto", {}),
        ({"trigger": "manual", "preTokens": 142431, "postTokens": 9000}, {"trigger": "manual", "pre_tokens": 142431}),
        ({"trigger": 7, "preTokens": "many"}, {}),
        ({"trigger": "", "preTokens": -1}, {}),
        ({"trigger": "auto", "preTokens": True}, {"trigger": "auto"}),
    ],
)
def test_a_boundary_keeps_only_what_its_marker_says_plainly(meta: Any, facts: dict[str, Any]) -> None:
    marker = {"compactMetadata": meta} if meta is not None else {}
    lines = [
        user("u1", "go"),
        _line("system", "b1", "u1", subtype="compact_boundary", **marker),
        _line("system", "b2", "b1", subtype="compact_boundary", compactMetadata={"trigger": "auto"}),
        user("u2", "summary", "b2", isCompactSummary=True),
    ]
    conv = read_transcript("\n".join(lines[:2] + lines[3:]), "claude-code").main
    assert conv is not None
    assert (conv.segment_starts, conv.boundary_facts) == ([1], {1: facts})
    twice = read_transcript("\n".join(lines), "claude-code").main  # two markers in a row: one start, the latest's facts
    assert twice is not None
    assert (twice.segment_starts, twice.boundary_facts) == ([1], {1: {"trigger": "auto"}})


def test_feed_accepts_a_whole_text_chunk() -> None:
    reader = ClaudeCodeReader()
    out = reader.feed("\n".join(FIXTURE_LINES) + "\n") + reader.finish()
    whole = read_transcript("\n".join(FIXTURE_LINES), "claude-code")
    assert len(out) == sum(len(c.messages) for c in whole.conversations)


# ----------------------------------------------------------------------------- OpenAI


def test_openai_plain_list_maps_system_tool_calls_and_tool_results() -> None:
    data = [
        {"role": "system", "content": "You are helpful."},
        {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}},
                {"id": "call_2", "type": "function", "function": {"name": "clock", "arguments": "{not json"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": None},
        {"role": "system", "content": "Reminder: be brief."},
        {"role": "assistant", "content": None},
    ]
    t = read_transcript(json.dumps(data), "openai")
    assert [c.key for c in t.conversations] == ["main"]
    conv = t.main
    assert conv is not None
    assert conv.system_prompt == "You are helpful.\n\nBe brief."
    assert roles_and_kinds(conv) == [
        ("user", "weather in Paris?"),
        ("assistant", ["text", "tool_use", "tool_use"]),
        ("tool", ["tool_result"]),
        ("tool", ["tool_result"]),
        ("system", "Reminder: be brief."),
        ("assistant", ""),
    ]
    blocks = conv.messages[1]["content"]
    assert blocks[0] == {"type": "text", "text": "Checking."}
    assert blocks[1] == {"type": "tool_use", "id": "call_1", "name": "weather", "input": {"city": "Paris"}}
    assert blocks[2]["input"] == {"_raw": "{not json"}
    assert conv.messages[2]["content"] == [{"type": "tool_result", "tool_use_id": "call_1", "content": "sunny"}]
    assert conv.messages[3]["content"] == [{"type": "tool_result", "tool_use_id": "call_2", "content": ""}]
    for m in conv.messages:
        normalize_message(m)  # every message is one the REST API accepts


def test_openai_content_parts_become_blocks() -> None:
    data = {
        "model": "gpt-4o",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,QUJD"}},
                    {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
                ],
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {}}},
            }
        ],
    }
    conv = read_transcript(json.dumps(data), "openai").main
    assert conv is not None
    assert conv.model == "gpt-4o"
    assert conv.tools == [{"name": "f", "description": "d", "input_schema": {"type": "object", "properties": {}}}]
    assert conv.messages[0]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "QUJD"}},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
    ]


def test_swe_agent_history_with_tool_call_ids() -> None:
    traj = {
        "environment": "main",
        "trajectory": [],
        "info": {"exit_status": "submitted"},
        "replay_config": json.dumps(
            {"agent": {"model": {"name": "gpt-4o"}}, "problem_statement": {"id": "repo__issue-1"}}
        ),
        "history": [
            {"role": "system", "content": "SETTING: ...", "agent": "main", "message_type": "system_prompt"},
            {"role": "user", "content": "fix the bug", "agent": "main", "message_type": "observation"},
            {
                "role": "assistant",
                "content": "Two commands.",
                "thought": "Two commands.",
                "action": "ls; pwd",
                "agent": "main",
                "message_type": "action",
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
                    {"id": "c2", "type": "function", "function": {"name": "bash", "arguments": '{"command": "pwd"}'}},
                ],
            },
            {
                "role": "tool",
                "content": "a.py\n/testbed",
                "agent": "main",
                "message_type": "observation",
                "tool_call_ids": ["c1", "c2"],
            },
        ],
    }
    conv = read_transcript(json.dumps(traj), "openai").main
    assert conv is not None
    assert conv.system_prompt == "SETTING: ..."
    assert conv.model == "gpt-4o"
    assert conv.title == "SWE-agent: repo__issue-1"
    tool = conv.messages[2]
    assert tool["role"] == "tool"
    assert tool["content"] == [
        {"type": "tool_result", "tool_use_id": "c1", "content": "a.py\n/testbed"},
        {"type": "tool_result", "tool_use_id": "c2", "content": ""},
    ]
    assert tool["metadata"] == {"message_type": "observation", "tool_call_ids": ["c1", "c2"]}
    assert conv.messages[1]["metadata"] == {"message_type": "action"}  # thought/action/agent are not kept
    assert conv.messages[1]["content"][0] == {"type": "text", "text": "Two commands."}


def test_tau_bench_episodes_are_separate_conversations_with_reused_ids_made_unique() -> None:
    def episode(task_id: int, reward: float) -> dict[str, Any]:
        calls = [{"id": "call_X", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}]
        return {
            "task_id": task_id,
            "reward": reward,
            "info": {},
            "trial": 0,
            "traj": [
                {"role": "system", "content": "policy"},
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": "call_X", "name": "lookup", "content": "first"},
                {"role": "assistant", "content": None, "tool_calls": calls},
                {"role": "tool", "tool_call_id": "call_X", "name": "lookup", "content": "second"},
            ],
        }

    t = read_transcript(json.dumps([episode(7, 1.0), episode(8, 0.0)]), "openai")
    assert [c.key for c in t.conversations] == ["episode-0", "episode-1"]
    first = t.conversations[0]
    assert first.title == "task 7, trial 0"
    assert first.metadata == {"task_id": 7, "trial": 0, "reward": 1.0}
    assert first.system_prompt == "policy"
    ids = [(b["type"], b.get("id") or b.get("tool_use_id")) for m in first.messages[1:] for b in m["content"]]
    assert ids == [
        ("tool_use", "call_X"),
        ("tool_result", "call_X"),
        ("tool_use", "call_X_2"),
        ("tool_result", "call_X_2"),
    ]
    assert first.messages[4]["content"][0]["content"] == "second"
    assert first.messages[3]["metadata"]["original_tool_use_ids"] == {"call_X_2": "call_X"}
    assert t.conversations[1].messages[2]["content"][0]["tool_use_id"] == "call_X"  # ids are per conversation


def test_openai_jsonl_of_messages() -> None:
    lines = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]
    conv = read_transcript("\n".join(json.dumps(x) for x in lines), "openai").main
    assert conv is not None
    assert roles_and_kinds(conv) == [("user", "a"), ("assistant", "b")]


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ("this is not json", "not valid JSON"),
        ("", "empty"),
        ('{"foo": 1}', "without 'messages'"),
        ("42", "a number"),
        ('["a", "b"]', "not of chat messages"),
    ],
)
def test_openai_rejects_what_is_not_a_transcript(data: str, needle: str) -> None:
    with pytest.raises(TranscriptError, match=needle):
        read_transcript(data, "openai")


def test_unknown_format_is_an_error() -> None:
    with pytest.raises(TranscriptError, match="claude-code, openai, anthropic, codex"):
        read_transcript("[]", "gemini")
    assert FORMATS == ("claude-code", "openai", "anthropic", "codex")


# ----------------------------------------------------------------------------- Anthropic


def test_anthropic_request_with_system_blocks_and_tools() -> None:
    req: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "system": [
            {"type": "text", "text": "You are Claude Code."},
            {"type": "text", "text": "Project rules.", "cache_control": {"type": "ephemeral"}},
        ],
        "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "run ls"},
            {"role": "assistant", "content": [text("ok"), call("toolu_1")]},
            {"role": "user", "content": result("toolu_1", "a.py")},
        ],
    }
    t = read_transcript(json.dumps(req).encode(), "anthropic")
    conv = t.main
    assert conv is not None
    assert conv.key == "main"
    assert conv.system_prompt == "You are Claude Code.\n\nProject rules."
    assert conv.tools == req["tools"]
    assert conv.model == "claude-sonnet-4-5"
    assert [m["role"] for m in conv.messages] == ["user", "assistant", "user"]
    assert conv.messages[1]["content"] == req["messages"][1]["content"]
    assert conv.messages[2]["content"] == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py"}]


def test_anthropic_list_of_requests() -> None:
    reqs = [
        {"system": "s1", "messages": [{"role": "user", "content": "a"}]},
        {"messages": [{"role": "user", "content": "b"}]},
    ]
    t = read_transcript(json.dumps(reqs), "anthropic")
    assert [(c.key, c.system_prompt, c.messages[0]["content"]) for c in t.conversations] == [
        ("request-0", "s1", "a"),
        ("request-1", "", "b"),
    ]


@pytest.mark.parametrize("data", ["nope", '{"model": "x"}', '[{"model": "x"}]', '"text"'])
def test_anthropic_rejects_what_is_not_a_request(data: str) -> None:
    with pytest.raises(TranscriptError, match="not"):
        read_transcript(data, "anthropic")


# ----------------------------------------------------------------------------- the real transcripts


def _check_conversation(conv: Conversation) -> None:
    calls: set[str] = set()
    assistant_ids = []
    for i, m in enumerate(conv.messages):
        normalize_message(m, index=i)
        if m["role"] == "assistant" and m["client_id"] is not None:
            assistant_ids.append(m["client_id"])
        if isinstance(m["content"], str):
            continue
        for b in m["content"]:
            if b["type"] == "tool_result":
                assert b["tool_use_id"] in calls, f"{conv.key}[{i}]: result for an unseen call {b['tool_use_id']}"
            if b["type"] == "tool_use":
                assert b["id"] not in calls, f"{conv.key}[{i}]: tool_use id {b['id']} used twice"
                calls.add(b["id"])
    assert len(assistant_ids) == len(set(assistant_ids))
    for p in conv.usage_points:
        assert conv.messages[p.message_index]["role"] == "assistant"
        assert p.context_tokens > 0
    for s in conv.segment_starts:
        assert 0 <= s <= len(conv.messages)


@pytest.mark.data
@pytest.mark.parametrize("name", CLAUDE_FILES)
def test_every_claude_code_file_reads_cleanly(shared_data: Path, name: str) -> None:
    raw = (shared_data / "claude_code" / name).read_bytes()
    t = read_transcript(raw, "claude-code")
    assert t.main is not None and t.main.messages
    for conv in t.conversations:
        _check_conversation(conv)

    events = [json.loads(line) for line in raw.decode().split("\n") if line.strip()]
    responses = {e["message"]["id"] for e in events if e.get("type") == "assistant"}
    with_usage = {
        e["message"]["id"]
        for e in events
        if e.get("type") == "assistant"
        and e["message"].get("model") != "<synthetic>"
        and sum(
            e["message"].get("usage", {}).get(k, 0)
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        > 0
    }
    convs = t.conversations
    # one assistant message per API response, one usage point per response that carries usage
    assert sum(m["role"] == "assistant" for c in convs for m in c.messages) == len(responses)
    assert sum(len(c.usage_points) for c in convs) == len(with_usage) > 0
    kinds = Counter(e.get("type") for e in events if e.get("type") not in ("user", "assistant"))
    assert t.skipped == dict(kinds)
    boundaries = sum(e.get("subtype") == "compact_boundary" for e in events)
    assert sum(len(c.segment_starts) for c in convs) == boundaries


@pytest.mark.data
@pytest.mark.parametrize("name", OPENAI_FILES)
def test_every_openai_file_reads_cleanly(shared_data: Path, name: str) -> None:
    t = read_transcript((shared_data / "openai" / name).read_bytes(), "openai")
    assert t.conversations and t.skipped == {}
    for conv in t.conversations:
        assert conv.messages and conv.system_prompt
        _check_conversation(conv)


@pytest.mark.data
def test_ccviewer_file_has_two_sub_agents_and_a_meta_prompt(shared_data: Path) -> None:
    t = read_transcript(
        (shared_data / "claude_code" / "ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl").read_bytes(),
        "claude-code",
    )
    assert [(c.key, c.sidechain, len(c.messages)) for c in t.conversations] == [
        ("main", False, 25),
        ("sidechain-1", True, 6),
        ("sidechain-2", True, 14),
    ]
    assert t.main is not None
    assert t.main.external_id == "5c0375b4-57a5-4f26-b12d-d022ee4e51b7"
    assert t.main.messages[1]["metadata"].get("is_meta") is True
    assert t.conversations[1].messages[0]["content"].startswith("Examine the package.json")
    assert "CLAUDE.md" in t.main.messages[-1]["content"][0]["text"]  # Japanese text intact


@pytest.mark.data
def test_compacted_session_has_a_boundary_before_its_summary(shared_data: Path) -> None:
    conv = read_transcript((shared_data / "claude_code" / "spotter_8463c716.jsonl").read_bytes(), "claude-code").main
    assert conv is not None
    (start,) = conv.segment_starts
    assert conv.messages[start]["metadata"]["is_compact_summary"] is True
    assert conv.messages[start]["content"].startswith("This session is being continued")
    # the context shrank across the boundary
    before = [p for p in conv.usage_points if p.message_index < start][-1]
    after = next(p for p in conv.usage_points if p.message_index > start)
    assert after.context_tokens < before.context_tokens


@pytest.mark.data
def test_rewinds_and_thinking_are_kept(shared_data: Path) -> None:
    raw = (shared_data / "claude_code" / "kfischer_b3edadab.jsonl").read_bytes()
    conv = read_transcript(raw, "claude-code").main
    assert conv is not None
    assert conv.title == "Test file creation and agent thread handling"
    thinking = [
        b for m in conv.messages if isinstance(m["content"], list) for b in m["content"] if b["type"] == "thinking"
    ]
    events = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
    recorded = [
        b for e in events if e.get("type") == "assistant" for b in e["message"]["content"] if b["type"] == "thinking"
    ]
    assert len(thinking) == len(recorded) == 15
    assert [b["thinking"] for b in thinking] == [b["thinking"] for b in recorded]
    assert all(b["signature"] for b in thinking)
    prompts = [m["content"] for m in conv.messages if m["role"] == "user" and isinstance(m["content"], str)]
    # three branches were started from the same point; all are kept, in file order
    assert [p[:20] for p in prompts if p.startswith("Ok")][:5] == [
        "Ok now make a task a",
        "Ok make another addi",
        "Ok I came from the f",
        "Ok in the future som",
        "Ok ultrathink and co",
    ]


@pytest.mark.data
def test_tau_bench_and_swe_agent_shapes(shared_data: Path) -> None:
    tau = read_transcript(
        (shared_data / "openai" / "tau-bench_gpt-4o-airline_episodes-000-039.json").read_bytes(), "openai"
    )
    assert [c.key for c in tau.conversations] == [f"episode-{k}" for k in range(40)]
    assert tau.conversations[0].title == "task 0, trial 0"
    assert sum("original_tool_use_ids" in m["metadata"] for c in tau.conversations for m in c.messages) > 0
    swe = read_transcript(
        (shared_data / "openai" / "swe-agent_marshmallow-1867_function_calling.traj").read_bytes(), "openai"
    )
    conv = swe.main
    assert conv is not None
    assert len(conv.messages) == 23 and conv.system_prompt.startswith("SETTING:")
    assert {m["metadata"].get("message_type") for m in conv.messages} >= {"observation", "action"}


@pytest.mark.data
@pytest.mark.parametrize(
    "name",
    [
        "ccviewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
        "spotter_tool_heavy.jsonl",
        "kfischer_b3edadab.jsonl",
        "spotter_sub_6c2214d7_agent-afc096d.jsonl",
    ],
)
def test_real_files_read_the_same_in_any_chunking(shared_data: Path, name: str) -> None:
    lines = (shared_data / "claude_code" / name).read_text(encoding="utf-8").split("\n")
    _assert_same_as_whole(lines, range(5))
