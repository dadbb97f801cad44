"""Builders for sessions worth compacting, and a byte-exact picture of their rows."""

from __future__ import annotations

import json
import random
from typing import Any

from compaction.messages import normalize_message
from sessions_app import tasks
from sessions_app.models import AgentSession, Message
from sessions_app.services import ingest

WORDS = [
    "build",
    "test",
    "config",
    "request",
    "handler",
    "module",
    "parser",
    "value",
    "token",
    "queue",
    "worker",
    "cache",
    "index",
]


def log_output(rng: random.Random, lines: int, *, error: str | None = None) -> str:
    out = [f"[{i:04d}] {' '.join(rng.choice(WORDS) for _ in range(8))}" for i in range(lines)]
    if error:
        out.insert(lines // 2, error)
    return "\n".join(out)


def agent_rounds(rounds: int, *, seed: int = 1, output_lines: int = 120, start: int = 0) -> list[dict[str, Any]]:
    """An agent at work: a prompt now and then, tool calls with long outputs, short replies."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = []
    for i in range(start, start + rounds):
        if i % 4 == 0:
            messages.append({"role": "user", "content": f"Step {i}: please fix the failing test in src/mod_{i}.py"})
        tool_id = f"toolu_{seed}_{i}"
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Running the suite for step {i}."},
                    {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": f"pytest tests/t_{i}.py"}},
                ],
            }
        )
        error = f"ERROR tests/t_{i}.py::test_{i} failed: AssertionError" if i % 3 == 0 else None
        messages.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tool_id,
                        "content": log_output(rng, output_lines, error=error),
                    }
                ],
            }
        )
        messages.append({"role": "assistant", "content": f"Step {i} done; src/mod_{i}.py updated."})
    messages.append({"role": "user", "content": "Now summarize what changed and what is left, verbatim please."})
    return messages


def append(session: AgentSession, messages: list[dict[str, Any]]) -> None:
    """Store the messages as an agent's appends would, each batch followed by what it sets off."""
    normalized = [normalize_message(m, index=i) for i, m in enumerate(messages)]
    for start in range(0, len(normalized), 500):
        ingest.message_append(session=session, messages=normalized[start : start + 500])
        tasks.followup_send(session.pk)
    session.refresh_from_db()


def rows_of(session: AgentSession) -> list[tuple]:
    """Every stored field a compaction may change, in seq order."""
    return list(
        Message.objects.filter(session=session)
        .order_by("seq")
        .values_list("seq", "role", "content", "tokens", "tokens_exact", "state", "compaction_id", "client_id")
    )


def totals_of(session: AgentSession) -> tuple:
    session.refresh_from_db()
    return (session.message_tokens, session.active_message_count, session.summary_tokens, session.message_count)


def checkpoint_reply(body: dict) -> str:
    """What the fake Anthropic API answers a summarize call with: a valid checkpoint for the
    sessions ``agent_rounds`` builds."""
    return json.dumps(
        {
            "objective": "Fix the failing tests",
            "completed": ["ran the suite"],
            "in_progress": ["step 23"],
            "pending": ["summarize what changed"],
            "blockers": [],
            "decisions": [{"decision": "keep pytest", "rationale": "the suite uses it"}],
            "files_modified": [{"path": "src/mod_1.py", "what": "fixed"}],
            "important_details": ["pytest tests/t_1.py"],
            "last_user_request": "Now summarize what changed and what is left, verbatim please.",
        }
    )
