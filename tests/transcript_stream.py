"""Helpers for the streaming property tests: generated Claude Code transcripts with the shapes that
broke transcript sync (parallel tool calls interleaved with their results and progress lines,
thinking blocks, sub-agents, a compact boundary, repeated and unreadable lines), upload plans
(any cut into whole-line uploads, ``final`` anywhere, repeats, the hook firing twice), and the
comparison of a streamed session with a one-shot import."""

from __future__ import annotations

import itertools
import json
import random
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

# ----------------------------------------------------------------------------- transcripts


class Writer:
    """Claude Code JSONL written one event at a time (the shapes real files have)."""

    def __init__(self, session: str, model: str = "claude-opus-4-5") -> None:
        self.session, self.model = session, model
        self.lines: list[str] = []
        self.n = 0
        self.last: dict[bool, str | None] = {False: None, True: None}

    def event(self, kind: str, message: dict[str, Any] | None = None, *, side: bool = False, **extra: Any) -> str:
        self.n += 1
        uuid = f"{self.session}-u{self.n}"
        event: dict[str, Any] = {
            "type": kind,
            "uuid": uuid,
            "parentUuid": self.last[side],
            "sessionId": self.session,
            "isSidechain": side,
            "timestamp": f"2025-06-01T10:{self.n // 60 % 60:02d}:{self.n % 60:02d}Z",
            **extra,
        }
        if message is not None:
            event["message"] = message
        self.last[side] = uuid
        self.lines.append(json.dumps(event, ensure_ascii=False) + "\n")
        return uuid

    def raw(self, line: str) -> None:
        self.lines.append(line if line.endswith("\n") else line + "\n")

    def prompt(self, text: str, *, side: bool = False) -> None:
        self.event("user", {"role": "user", "content": text}, side=side)

    def block(self, message_id: str, block: dict[str, Any], *, side: bool = False) -> None:
        body = {
            "id": message_id,
            "role": "assistant",
            "model": self.model,
            "content": [block],
            "stop_reason": None,
            "usage": {"input_tokens": 100 + self.n, "output_tokens": 20},
        }
        self.event("assistant", body, side=side, requestId=f"req-{message_id}")

    def result(self, tool_id: str, output: Any, *, side: bool = False, is_error: bool = False) -> None:
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": tool_id, "content": output}
        if is_error:
            block["is_error"] = True
        self.event("user", {"role": "user", "content": [block]}, side=side)

    def progress(self) -> None:
        self.event("progress", None, data={"type": "hook_progress"})

    def boundary(self, summary: Any = None, *, side: bool = False, marker: bool = True) -> None:
        """Claude Code's own compaction: the marker line, then (unless ``summary`` is None) its summary."""
        if marker:
            meta = {"trigger": "auto", "preTokens": 1000 + self.n}
            self.event("system", None, side=side, subtype="compact_boundary", content="Compacted", compactMetadata=meta)
        if summary is not None:
            self.event("user", {"role": "user", "content": summary}, side=side, isCompactSummary=True)

    def text(self) -> str:
        return "".join(self.lines)


def text_block(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_block(tool_id: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}


# One step of a generated session; the strategy below draws a list of them.
WORDS = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
STEP = st.one_of(
    st.tuples(st.just("prompt"), WORDS),
    st.tuples(st.just("parallel"), st.integers(1, 4), st.booleans(), st.booleans()),  # tools, thinking, closing text
    st.tuples(st.just("sequential"), st.integers(1, 3)),
    st.tuples(st.just("sidechain"), st.integers(1, 2)),
    st.tuples(st.just("boundary"), WORDS, st.booleans()),  # summary words, in a sub-agent
    st.tuples(st.just("odd_boundary"), st.sampled_from(["alone", "twice", "summary_only", "blocks", "image", "empty"])),
    st.tuples(st.just("repeat"), st.integers(0, 50)),
    st.tuples(st.just("junk"), st.sampled_from(["{not json", "[1, 2]", '{"type": "user"}', '"just a string"'])),
    st.tuples(st.just("hostile"), st.sampled_from(["surrogate", "deep", "timestamp", "nan", "nul"])),
)

DEEP_INPUT: Any = {"a": []}
_inner = DEEP_INPUT["a"]
for _ in range(200):
    _inner.append([])
    _inner = _inner[0]


def hostile_line(w: Writer, kind: str, i: int) -> None:
    """A line with what a recorded file may hold and storage can't: cleaned, never a wedge."""
    event: dict[str, Any] = {
        "type": "user",
        "uuid": f"{w.session}-h{i}",
        "sessionId": w.session,
        "isSidechain": False,
        "timestamp": "2025-06-01T10:00:00Z",
        "message": {"role": "user", "content": f"hostile {kind}"},
    }
    if kind == "surrogate":
        event["message"]["content"] = "cut inside an emoji \ud83d"
    elif kind == "deep":
        tool = {"type": "tool_use", "id": f"toolu_h{i}", "name": "Bash", "input": DEEP_INPUT}
        event = {**event, "type": "assistant", "message": {"id": f"msg_h{i}", "role": "assistant", "content": [tool]}}
    elif kind == "timestamp":
        event["timestamp"] = "0001-01-01T00:00:00+14:00"
    elif kind == "nan":
        event["message"]["content"] = [{"type": "text", "text": "x", "score": float("nan")}]
    elif kind == "nul":
        event["message"]["content"] = "binary \x00 output"
    text = json.dumps(event)  # ASCII: a lone surrogate is written escaped, as JSON encoders do
    w.raw(text.replace("\\ud83d", "\\ud83d").replace("\\x00", "\\u0000"))


def odd_boundary(w: Writer, kind: str) -> None:
    """What a hostile or cut file may hold around a compaction: none of it may fail or half-apply."""
    if kind == "alone":  # a marker whose summary never came
        w.boundary(None)
    elif kind == "twice":  # two markers in a row, one summary
        w.boundary(None)
        w.boundary("Summary after two markers")
    elif kind == "summary_only":  # a summary without its marker: an ordinary message
        w.boundary("A summary nobody marked", marker=False)
    elif kind == "blocks":  # the summary as text blocks
        w.boundary([text_block("Summary in"), text_block("two blocks")])
    elif kind == "image":  # a summary that holds no text: the marker changes nothing
        w.boundary([{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}])
    elif kind == "empty":
        w.boundary("")


def build(steps: list[tuple], session: str) -> str:
    """A transcript from generated steps; every tool call gets its result, as Claude Code writes them."""
    w = Writer(session)
    w.prompt("Start: fix the build")
    for i, step in enumerate(steps):
        kind = step[0]
        mid = f"msg_{i}"
        if kind == "prompt":
            w.prompt(step[1] or "go on")
        elif kind == "parallel":
            _, tools, thinking, closing = step
            if thinking:
                w.block(mid, {"type": "thinking", "thinking": f"plan {i}", "signature": f"sig{i}"})
            w.block(mid, text_block(f"Running {tools} things at once."))
            for k in range(tools):  # assistant M [tool k] · progress · user [result k] · assistant M [tool k+1] …
                w.block(mid, tool_block(f"toolu_{i}_{k}", f"cmd {i}.{k}"))
                w.progress()
                w.result(f"toolu_{i}_{k}", f"output {i}.{k}\n", is_error=k == 1)
            if closing:
                w.block(mid, text_block(f"All {tools} done."))
        elif kind == "sequential":
            for k in range(step[1]):
                w.block(f"{mid}_{k}", tool_block(f"toolu_{i}_{k}", f"step {k}"))
                w.result(f"toolu_{i}_{k}", [text_block(f"done {k}")])
            w.block(f"{mid}_end", text_block("Sequential steps done."))
        elif kind == "sidechain":
            w.prompt(f"Sub-task {i}", side=True)
            for k in range(step[1]):
                w.block(f"{mid}_s{k}", tool_block(f"toolu_{i}_s{k}", "look"), side=True)
                w.result(f"toolu_{i}_s{k}", "seen", side=True)
            w.block(f"{mid}_send", text_block("Sub-task done."), side=True)
        elif kind == "boundary" and step[2]:
            w.prompt(f"Sub-task {i}", side=True)
            w.boundary(f"Sub-agent summary: {step[1]}", side=True)
            w.block(f"{mid}_after", text_block("Sub-task goes on."), side=True)
        elif kind == "boundary":
            w.boundary(f"Summary: {step[1]}")
        elif kind == "odd_boundary":
            odd_boundary(w, step[1])
        elif kind == "repeat" and w.lines:
            w.raw(w.lines[step[1] % len(w.lines)])  # a line written twice (same uuid): skipped as a duplicate
        elif kind == "junk":
            w.raw(step[1])
        elif kind == "hostile":
            hostile_line(w, step[1], i)
    return w.text()


# ----------------------------------------------------------------------------- upload plans


@dataclass(frozen=True)
class Upload:
    start: int  # byte offset
    end: int
    final: bool


def line_ends(data: bytes) -> list[int]:
    return [i + 1 for i, b in enumerate(data) if b == 0x0A]


def random_plan(data: bytes, rng: random.Random, *, max_lines: int = 4, p_final: float = 0.3) -> list[Upload]:
    """Whole lines in groups of 1..max_lines; ``final`` on some; now and then a repeated range or the
    same upload twice; the last upload is final (the agent stopped), as an import reads to the end."""
    ends = line_ends(data)
    bounds = [0]
    i = 0
    while i < len(ends):
        i += rng.randint(1, max_lines)
        bounds.append(ends[min(i, len(ends)) - 1])
    plan: list[Upload] = []
    for a, b in itertools.pairwise(bounds):
        plan.append(Upload(a, b, rng.random() < p_final))
        roll = rng.random()
        if roll < 0.1:
            plan.append(Upload(a, b, rng.random() < p_final))  # the hook fired twice
        elif roll < 0.2:
            back = rng.choice([0, *[e for e in bounds if e < a]])
            plan.append(Upload(back, b, rng.random() < p_final))  # a repeated range (state lost)
    last = bounds[-1]
    plan.append(Upload(last, last, True))
    return plan


# ----------------------------------------------------------------------------- comparison


def rows(session: Any) -> list[tuple]:
    from sessions_app.models import Message

    return list(
        Message.objects.filter(session=session)
        .order_by("seq")
        .values_list("seq", "role", "content", "tokens", "client_id", "state", "metadata", "created_at")
    )


def compactions(session: Any) -> list[tuple]:
    """The session's compaction history as a streamed and an imported session must share it: each
    record, its backups (by message seq) and its checkpoints; not the times."""
    from sessions_app.models import Compaction

    order: dict[int | None, int] = {}
    out = []
    for n, record in enumerate(Compaction.objects.filter(session=session).order_by("id")):
        order[record.pk] = n
        backups = [
            (b.message.seq, b.content, b.tokens, b.tokens_exact, b.state, order.get(b.previous_compaction_id))
            for b in record.backups.select_related("message").order_by("message__seq")
        ]
        checkpoints = list(
            record.checkpoints.order_by("version").values_list(
                "version", "reason", "data", "upto_seq", "tokens", "lossy", "reverted"
            )
        )
        fields = (record.level, record.status, record.trigger, record.upto_seq, record.tokens_before)
        out.append((*fields, record.tokens_after, record.items, record.notes, backups, checkpoints))
    return out


def usage_of(session: Any) -> dict[str, Any]:
    """STATUS figures (not the ones that say when something happened)."""
    from sessions_app.selectors.usage import session_status

    session.refresh_from_db()
    status: dict[str, Any] = dict(session_status(session))
    keys = ("model", "used", "messages", "summary", "level", "compacted", "message_count", "active_messages")
    # the count's own warnings (an import records an unreadable line as skipped, a sync as rejected)
    counting = [w for w in status["warnings"] if "model read" in w]
    return {**{k: status[k] for k in (*keys, "token_source")}, "count_warnings": counting}


def contexts(session: Any) -> tuple[Any, Any]:
    from sessions_app.selectors import model_context

    session.refresh_from_db()
    out = []
    for fmt in ("anthropic", "openai"):
        body = model_context.session_context(session, fmt=fmt)
        body.pop("status")
        out.append(body)
    return out[0], out[1]
