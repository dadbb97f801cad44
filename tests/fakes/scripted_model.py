"""A model's turns, scripted, for a real agent CLI (Claude Code) talking to the fake Anthropic server.

``FakeAnthropic.set_message_function(ScriptedModel(turns))``: the agent's main conversation gets
turn N when its history holds N assistant messages, so a retried request gets the same turn again
and the script never runs ahead of the agent. Requests that are not the main conversation (a
title, a check, a subagent: another system prompt, no ``Write`` tool, a small ``max_tokens``) get
plain text, as a model answers them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.anthropic_rules import signature_for

SIDE_REPLY = "Scripted answer to a side request."
FINAL_REPLY = "Done: the scripted task is complete."


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(thought: str) -> dict[str, Any]:
    # The signature is opaque to the client; the agent sends it back with the block, and the fake checks it.
    return {"type": "thinking", "thinking": thought, "signature": signature_for(thought)}


def tool_use(name: str, tool_input: Mapping[str, Any], *, key: str) -> dict[str, Any]:
    """A tool call whose id is derived from ``key``, so a retried turn calls the same tool_use id."""
    return {"type": "tool_use", "id": "toolu_" + hashlib.sha256(key.encode()).hexdigest()[:24], "name": name,
            "input": dict(tool_input)}  # fmt: skip


def is_main_conversation(body: Mapping[str, Any]) -> bool:
    """Claude Code's own conversation: it offers ``Write`` and asks for a long answer."""
    tools = body.get("tools") or []
    names = {t.get("name") for t in tools if isinstance(t, dict)}
    max_tokens = body.get("max_tokens")
    return "Write" in names and isinstance(max_tokens, int) and max_tokens >= 4096


def assistant_turns(body: Mapping[str, Any]) -> int:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return 0
    return sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")


@dataclass
class ScriptedModel:
    """Plays ``turns`` (each a list of content blocks) in the main conversation, then ``final``."""

    turns: Sequence[Sequence[Mapping[str, Any]]]
    final: str = FINAL_REPLY
    side_reply: str = SIDE_REPLY
    is_main: Callable[[Mapping[str, Any]], bool] = is_main_conversation
    side_requests: int = field(default=0, init=False)

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if not self.is_main(body):
            self.side_requests += 1
            return {"content": [text(self.side_reply)], "stop_reason": "end_turn"}
        n = assistant_turns(body)
        if n < len(self.turns):
            return {"content": [dict(b) for b in self.turns[n]]}
        return {"content": [text(self.final)], "stop_reason": "end_turn"}


def file_writing_task(workdir: str, *, filename: str = "result.txt", content: str) -> list[list[dict[str, Any]]]:
    """The turns of a small coding task that touch what real sessions hold: a thought, parallel tool
    calls (Bash and Read, one of them failing), a large tool output (about 24 KB), ToolSearch (its
    result holds ``tool_reference`` blocks) for the deferred task tools, a file written, then read."""
    path = f"{workdir}/{filename}"
    return [
        [
            thinking("The user wants a file written. First look at the working directory."),
            text("I'll look at the working directory first."),
            tool_use("Bash", {"command": "ls -la", "description": "List the working directory"}, key="t0-ls"),
            tool_use("Read", {"file_path": f"{workdir}/missing.txt"}, key="t0-read"),
        ],
        [
            tool_use(
                "Bash", {"command": "cat /nonexistent/ctxweb-file", "description": "A failing command"}, key="t1-fail"
            ),
            tool_use("Bash", {"command": "seq 1 5000", "description": "A large output"}, key="t1-seq"),
            tool_use("ToolSearch", {"query": "select:TaskCreate,TaskUpdate"}, key="t1-search"),
        ],
        [
            thinking("The directory is empty; write the file now."),
            tool_use("Write", {"file_path": path, "content": content}, key="t2-write"),
        ],
        [tool_use("Read", {"file_path": path}, key="t3-read")],
    ]


@dataclass
class ResumingModel(ScriptedModel):
    """As ``ScriptedModel``, but the next turn follows the newest of its own tool calls the request
    answers, not the number of assistant messages it holds: a proxy that sends a compacted history
    (fewer messages, older calls summarized, calls written out as text) gets the turn that comes next."""

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if not self.is_main(body):
            self.side_requests += 1
            return {"content": [text(self.side_reply)], "stop_reason": "end_turn"}
        n = self.next_turn(body)
        if n < len(self.turns):
            return {"content": [dict(b) for b in self.turns[n]]}
        return {"content": [text(self.final)], "stop_reason": "end_turn"}

    def next_turn(self, body: Mapping[str, Any]) -> int:
        """One after the latest turn whose call id the request's last message mentions (a result, or
        its text); 0 when it mentions none (the task's first request)."""
        messages = body.get("messages")
        last = json.dumps(messages[-1]) if isinstance(messages, list) and messages else ""
        answered = [
            n for n, turn in enumerate(self.turns) for b in turn if b.get("type") == "tool_use" and b["id"] in last
        ]
        return max(answered) + 1 if answered else 0


def reading_task(
    workdir: str, files: Sequence[str], *, filename: str = "summary.txt", content: str
) -> list[list[dict[str, Any]]]:
    """A task whose context grows past a small window: a large file read a step, a thought at the start
    and at every third step only (a model thinks when it plans, not at every call), then a file
    written and read back."""
    path = f"{workdir}/{filename}"
    turns: list[list[dict[str, Any]]] = [
        [
            thinking("The user wants every notes file read, then a summary written. Start with the listing."),
            text("I'll list the notes first."),
            tool_use("Bash", {"command": "ls -la", "description": "List the working directory"}, key="r-ls"),
        ]
    ]
    for n, name in enumerate(files):
        step = [thinking(f"Read the next notes, {name}.")] if n % 3 == 2 else []
        turns.append([*step, tool_use("Read", {"file_path": f"{workdir}/{name}"}, key=f"r-read-{name}")])
    written = tool_use("Write", {"file_path": path, "content": content}, key="r-write")
    turns.append([thinking("Every file is read; write the summary."), written])
    turns.append([tool_use("Read", {"file_path": path}, key="r-check")])
    return turns
