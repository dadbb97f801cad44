"""Claude Code's request lines (``api-request-blob``, ``api-request``): the import reads each request's
user message as the model read it. On the real transcript of Claude Code 2.1.328, on hand-made lines
for each rule, and as a property over generated transcripts (tests/transcript_blobs.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.messages import normalize_message
from compaction.transcripts import ClaudeCodeReader, read_transcript
from compaction.transcripts.base import content_of
from compaction.transcripts.claude_code_lines import lines_as_sent, sent_hash
from tests.hypothesis_budget import ENGINE
from tests.transcript_blobs import BLOB_STEP, build_with_blobs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "clients" / "claude_code_2.1.328"
SESSION = "sess-b"


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def shape(messages: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [
        (m["role"], [b["type"] for b in m["content"]] if isinstance(m["content"], list) else "text") for m in messages
    ]


# ----------------------------------------------------------------------------- the real transcript


def test_the_real_transcript_reads_as_the_requests_claude_code_sent() -> None:
    path = FIXTURES / "transcript.jsonl"
    lines = events(path)
    t = read_transcript(path.read_bytes(), "claude-code")
    (conv,) = t.conversations
    # 8 user lines and 5 responses; the model read 5 requests and wrote 5 responses.
    assert sum(e["type"] == "user" for e in lines) == 8
    assert len({e["message"]["id"] for e in lines if e["type"] == "assistant"}) == 5
    assert len(conv.messages) == 10
    assert [m["role"] for m in conv.messages] == ["user", "assistant"] * 5
    # The last request of the recorded run (another run of the same task: other ids, same shape).
    last_request = json.loads((FIXTURES / "04.json").read_text())["body"]["messages"]
    assert shape(conv.messages[:-1]) == shape(last_request)
    # Each user message is its request's blob, exactly (as every reader makes blocks canonical).
    blobs = [e for e in lines if e["type"] == "api-request-blob"]
    users = [m for m in conv.messages if m["role"] == "user"]
    assert [content_of(b["message"]["content"]) for b in blobs] == [u["content"] for u in users]
    assert [u["metadata"]["blob"] for u in users] == [b["hash"] for b in blobs]
    assert [u["metadata"]["lines"] for u in users] == [1, 2, 3, 1, 1]
    # Named after the first line each stands for: the prompt, then the first result written.
    user_lines = [e for e in lines if e["type"] == "user"]
    assert users[0]["client_id"] == user_lines[0]["uuid"] and users[1]["client_id"] == user_lines[1]["uuid"]
    # What the lines never held: the attachments' reminders, and the reminder inside a tool result.
    assert sum("<system-reminder>" in b.get("text", "") for b in users[0]["content"]) == 8
    assert users[0]["content"][-1]["text"].startswith("Write the line 'hello from ctxweb'")
    assert "<system-reminder>" in users[-1]["content"][0]["content"]
    assert "<system-reminder>" not in json.dumps(user_lines[-1]["message"]["content"])
    # Usage at every response; blobs used are not skipped, the other lines are.
    assert [p.message_index for p in conv.usage_points] == [1, 3, 5, 7, 9]
    assert "api-request-blob" not in t.skipped and t.skipped["api-request"] == 5
    for i, m in enumerate(conv.messages):
        normalize_message(m, index=i)


def test_the_real_transcript_reads_the_same_in_any_chunking() -> None:
    lines = (FIXTURES / "transcript.jsonl").read_text(encoding="utf-8").split("\n")
    assert_same_as_whole(lines, range(20))


# ----------------------------------------------------------------------------- hand-made lines


def _line(kind: str, uuid: str | None, parent: str | None = None, **extra: Any) -> str:
    event: dict[str, Any] = {"type": kind, "parentUuid": parent, "isSidechain": False, "sessionId": SESSION}
    if uuid is not None:
        event["uuid"] = uuid
    event["timestamp"] = f"2026-01-02T03:04:{len(uuid or '') % 60:02d}.000Z"
    return json.dumps({**event, **extra})


def user(uuid: str, content: Any, **extra: Any) -> str:
    return _line("user", uuid, message={"role": "user", "content": content}, **extra)


def assistant(uuid: str, mid: str, *blocks: dict[str, Any], **extra: Any) -> str:
    body = {"id": mid, "role": "assistant", "model": "claude-sonnet-4-5", "content": list(blocks)}
    return _line("assistant", uuid, message=body, **extra)


def blob(content: Any, digest: str | None = "auto") -> str:
    message = {"role": "user", "content": content}
    line: dict[str, Any] = {"type": "api-request-blob", "sessionId": SESSION, "message": message}
    if digest is not None:
        line["hash"] = sent_hash("user", content) if digest == "auto" else digest
    return json.dumps(line)


def request(tail: list[str]) -> str:
    return json.dumps({"type": "api-request", "sessionId": SESSION, "keep": 1, "tail": tail})


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def call(tid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": "ls"}}


def result(tid: str, out: str = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": out}


REMINDER = text("<system-reminder>\nToday is Friday.\n</system-reminder>")
PROMPT = [user("u1", "list files"), _line("attachment", "at1", attachment={"type": "date"})]
RESPONSE = [assistant("a1", "msg_A", call("t1")), assistant("a2", "msg_A", call("t2"))]
RESULTS = [user("u2", [result("t2", "two")]), user("u3", [result("t1", "one")])]
SENT = [result("t1", "one"), result("t2", "two\n\n<system-reminder>\n9 left\n</system-reminder>")]


def read(lines: list[str]) -> Any:
    return read_transcript("\n".join(lines) + "\n", "claude-code")


def kinds(t: Any) -> list[tuple[str, str, Any]]:
    assert t.main is not None
    return [(m["role"], m["client_id"], shape([m])[0][1]) for m in t.main.messages]


def test_parallel_results_become_the_one_message_their_request_sent() -> None:
    t = read([*PROMPT, blob([REMINDER, text("list files")]), *RESPONSE, *RESULTS, blob(SENT)])
    assert kinds(t) == [
        ("user", "u1", ["text", "text"]),
        ("assistant", "msg_A", ["tool_use", "tool_use"]),
        ("user", "u2", ["tool_result", "tool_result"]),
    ]
    merged = t.main.messages[2]
    assert merged["content"] == SENT
    assert merged["metadata"] == {"uuid": "u2", "blob": sent_hash("user", SENT), "lines": 2}
    assert merged["created_at"] == "2026-01-02T03:04:02.000Z"
    assert t.skipped == {"attachment": 1}


def test_without_request_lines_the_lines_come_out_as_they_are() -> None:
    t = read([*PROMPT, *RESPONSE, *RESULTS])
    assert kinds(t) == [
        ("user", "u1", "text"),
        ("assistant", "msg_A", ["tool_use", "tool_use"]),
        ("user", "u2", ["tool_result"]),
        ("user", "u3", ["tool_result"]),
    ]


def test_a_request_with_no_blob_merges_the_lines_its_hash_names() -> None:
    together = lines_as_sent([[result("t2", "two")], [result("t1", "one")]])
    t = read([*PROMPT, *RESPONSE, *RESULTS, request(["reply-hash", sent_hash("user", together)])])
    assert kinds(t)[2:] == [("user", "u2", ["tool_result", "tool_result"])]
    assert t.main.messages[2]["metadata"] == {"uuid": "u2", "lines": 2}
    other = read([*PROMPT, *RESPONSE, *RESULTS, request(["reply-hash", "another message"])])
    assert len(other.main.messages) == 4  # a hash that is not theirs: the lines stay


def test_what_a_blob_cannot_stand_for_is_skipped() -> None:
    cases = {
        "nothing held": [*PROMPT, assistant("a0", "msg_0", text("hi")), blob([text("y")])],
        "other calls": [*PROMPT, *RESPONSE, *RESULTS, blob([result("t1", "one"), result("t9", "?")])],
        "no message": [*PROMPT, *RESPONSE, *RESULTS, json.dumps({"type": "api-request-blob", "hash": "h"})],
        "empty": [*PROMPT, *RESPONSE, *RESULTS, blob([])],
    }
    for why, lines in cases.items():
        t = read(lines)
        assert t.skipped.get("api-request-blob", 0) >= 1, why
        assert all("blob" not in m["metadata"] for m in t.main.messages), why


def test_a_retried_blob_changes_nothing() -> None:
    first = blob([REMINDER, text("list files")])
    t = read([*PROMPT, first, first, *RESPONSE, *RESULTS, first])
    assert kinds(t) == [
        ("user", "u1", ["text", "text"]),
        ("assistant", "msg_A", ["tool_use", "tool_use"]),
        ("user", "u2", ["tool_result"]),  # held lines are not the retried prompt's
        ("user", "u3", ["tool_result"]),
    ]
    assert t.skipped["api-request-blob"] == 2


def test_flags_of_the_merged_lines() -> None:
    lines = [
        user("u1", "summary of before", isCompactSummary=True),
        user("u2", "<local-command-stdout>ok</local-command-stdout>", isMeta=True),
        user("u3", "go on"),
        blob([text("summary of before"), text("go on")]),
    ]
    assert read(lines).main.messages[0]["metadata"]["is_compact_summary"] is True
    assert "is_meta" not in read(lines).main.messages[0]["metadata"]
    meta = [user("u1", "a", isMeta=True), user("u2", "b", isMeta=True), blob([text("a"), text("b")])]
    assert read(meta).main.messages[0]["metadata"]["is_meta"] is True


def test_a_compaction_boundary_written_twice_keeps_the_summary_with_its_request() -> None:
    boundary = _line("system", "b1", "a2", subtype="compact_boundary", content="Compacted")
    summary = user("s1", "Summary: ", isCompactSummary=True)
    lines = [*PROMPT, *RESPONSE, *RESULTS, blob(SENT), boundary, summary, boundary, user("u4", "go on")]
    lines.append(blob([text("Summary: "), REMINDER, text("go on")]))
    t = read(lines)
    assert t.main.messages[-1]["content"] == [text("Summary: "), REMINDER, text("go on")]
    assert t.main.segment_starts[-1] == len(t.main.messages) - 1, "one boundary, before the summary"
    assert t.skipped["duplicate"] == 1


def test_held_lines_are_held_until_the_request_or_the_response() -> None:
    reader = ClaudeCodeReader()
    assert reader.feed(PROMPT) == [] and reader.held_back == 1
    assert [m["client_id"] for _, m in reader.feed(RESPONSE[:1])] == ["u1"]
    assert reader.feed(RESPONSE[1:] + RESULTS) == [] and reader.held_back == 3  # the response and 2 results
    out = reader.feed([blob(SENT)])
    assert [m["client_id"] for _, m in out] == ["msg_A", "u2"] and reader.held_back == 0


def test_a_blob_after_finish_is_skipped_and_seal_decides_the_same() -> None:
    lines = [*PROMPT, *RESPONSE, *RESULTS]
    finished = ClaudeCodeReader()
    finished.feed(lines)
    assert finished.replaceable == 2
    out = finished.finish()
    assert [m["client_id"] for _, m in out] == ["msg_A", "u2", "u3"]
    assert finished.feed([blob(SENT)]) == [] and finished.skipped["api-request-blob"] == 1
    sealed = ClaudeCodeReader()
    sealed.feed(lines)
    sealed.seal()
    assert sealed.replaceable == 0
    sealed.feed([blob(SENT)])
    sealed.finish()
    assert sealed.conversations[0].messages == finished.conversations[0].messages[:4]


def test_blob_lines_go_to_the_conversation_holding_lines() -> None:
    side = [
        user("s1", "sub-task", isSidechain=True),
        assistant("s2", "msg_S", call("ts"), isSidechain=True, parentUuid="s1"),
        user("s3", [result("ts")], isSidechain=True, parentUuid="s2"),
    ]
    only_side = read([*PROMPT, assistant("a0", "msg_0", text("hi")), *side, blob([result("ts"), REMINDER])])
    (sub,) = [c for c in only_side.conversations if c.sidechain]
    assert sub.messages[-1]["content"] == [result("ts"), REMINDER]
    both = read([*PROMPT, *side, blob([REMINDER, text("list files")])])  # both hold lines: the main one's
    assert both.main is not None and both.main.messages[0]["content"] == [REMINDER, text("list files")]
    (sub,) = [c for c in both.conversations if c.sidechain]
    assert [m["client_id"] for m in sub.messages] == ["s1", "msg_S", "s3"]


# ----------------------------------------------------------------------------- generated transcripts


def assert_same_as_whole(lines: list[str], seeds: range) -> None:
    whole = read_transcript("\n".join(lines), "claude-code")
    for seed in seeds:
        rng = random.Random(seed)
        reader, emitted, i = ClaudeCodeReader(), [], 0
        while i < len(lines):
            size = rng.choice([0, 1, 1, 2, 3, 5, 8])
            emitted += reader.feed(lines[i : i + size])
            i += size
        emitted += reader.finish()
        assert reader.conversations == whole.conversations, seed
        assert dict(reader.skipped) == whole.skipped, seed
        expected = [(c.key, m) for c in whole.conversations for m in c.messages]
        assert sorted(emitted, key=lambda e: e[0]) == sorted(expected, key=lambda e: e[0]), seed


@settings(ENGINE)
@given(steps=st.lists(BLOB_STEP, max_size=14))
def test_a_generated_transcript_reads_as_the_model_read_it(steps: list[tuple]) -> None:
    w = build_with_blobs(steps, SESSION)
    t = read_transcript(w.text(), "claude-code")
    assert t.main is not None
    assert [(m["role"], m["content"]) for m in t.main.messages] == w.sent
    for i, m in enumerate(t.main.messages):
        normalize_message(m, index=i)


@settings(ENGINE)
@given(steps=st.lists(BLOB_STEP, max_size=14), seed=st.integers(0, 2**32 - 1))
def test_any_chunking_of_a_generated_transcript_reads_as_the_whole(steps: list[tuple], seed: int) -> None:
    assert_same_as_whole(build_with_blobs(steps, SESSION).text().split("\n"), range(seed, seed + 3))


# ----------------------------------------------------------------------------- after Claude Code compacts


def test_after_claude_code_compacts_each_message_the_request_starts_from_is_its_blob() -> None:
    """A run of the coding task, then ``/compact`` and a prompt with ``--continue``: the first request
    after the compaction starts afresh (``keep`` 0) from four messages, a blob each — the summary, the
    reply Claude Code keeps, reminders, the prompt — and the import holds them as they were sent."""
    path = FIXTURES / "transcript_compacted.jsonl"
    lines = events(path)
    request = [e for e in lines if e.get("type") == "api-request"][-1]
    blobs = {e["hash"]: e["message"] for e in lines if e.get("type") == "api-request-blob"}
    assert request["keep"] == 0 and len(request["tail"]) == 4
    conversation = read_transcript(path.read_bytes(), "claude-code").main
    assert conversation is not None
    start = conversation.segment_starts[-1]
    after = conversation.messages[start:]
    sent = [blobs[h] for h in request["tail"]]
    assert [(m["role"], content_of(m["content"])) for m in after[:4]] == [
        (b["role"], content_of(b["content"])) for b in sent
    ]
    assert after[0]["metadata"]["is_compact_summary"] is True
    assert [m["role"] for m in after[4:]] == ["assistant"]  # the answer, and nothing else


def test_the_compacted_transcript_reads_the_same_in_any_chunking() -> None:
    lines = (FIXTURES / "transcript_compacted.jsonl").read_text(encoding="utf-8").split("\n")
    assert_same_as_whole(lines, range(20))
