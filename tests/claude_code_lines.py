"""Small Claude Code JSONL transcripts made up for tests: the shapes the real files have (a response
split over several lines sharing ``message.id``, tool results, sub-agent lines, non-message lines)."""

from __future__ import annotations

import json
from typing import Any

SESSION = "cc-test-1"


class Transcript:
    """Builds lines one event at a time; ``text()`` is the file."""

    def __init__(self, session: str = SESSION, model: str = "claude-opus-4-5") -> None:
        self.session = session
        self.model = model
        self.lines: list[str] = []
        self._n = 0
        self._last: str | None = None

    def _event(self, kind: str, message: dict[str, Any] | None, *, sidechain: bool = False, **extra: Any) -> str:
        self._n += 1
        uuid = f"{self.session}-u{self._n}"
        event = {
            "type": kind,
            "uuid": uuid,
            "parentUuid": self._last,
            "sessionId": self.session,
            "isSidechain": sidechain,
            "timestamp": f"2025-06-01T10:{self._n // 60:02d}:{self._n % 60:02d}Z",
            **extra,
        }
        if message is not None:
            event["message"] = message
        self._last = uuid
        self.lines.append(json.dumps(event, ensure_ascii=False) + "\n")
        return uuid

    def prompt(self, text: str, *, sidechain: bool = False) -> str:
        return self._event("user", {"role": "user", "content": text}, sidechain=sidechain)

    def response(self, message_id: str, *blocks: dict[str, Any], sidechain: bool = False, context: int = 1000) -> None:
        """One API response written as one line per content block, as Claude Code does."""
        for block in blocks:
            self._event(
                "assistant",
                {
                    "id": message_id,
                    "role": "assistant",
                    "model": self.model,
                    "content": [block],
                    "stop_reason": None,
                    "usage": {"input_tokens": context, "output_tokens": 50},
                },
                sidechain=sidechain,
                requestId=f"req-{message_id}",
            )

    def result(self, tool_use_id: str, output: str, *, sidechain: bool = False) -> str:
        content = [{"type": "tool_result", "tool_use_id": tool_use_id, "content": output}]
        return self._event("user", {"role": "user", "content": content}, sidechain=sidechain)

    def system(self, text: str = "hook ran") -> None:
        self._event("system", None, content=text, level="info")

    def text(self) -> str:
        return "".join(self.lines)


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool(tool_id: str, command: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "Bash", "input": {"command": command}}


def agent_session(
    turns: int = 3, *, session: str = SESSION, output: str = "ok\n", sub_agent: bool = False
) -> Transcript:
    """``turns`` rounds of: prompt, a response split over text + tool call, its result, a closing answer."""
    t = Transcript(session)
    t.system("session started")
    for n in range(1, turns + 1):
        t.prompt(f"Step {n}: run the tests")
        t.response(f"msg_{n}a", text(f"Running step {n}."), tool(f"toolu_{n}", f"make test-{n}"))
        t.result(f"toolu_{n}", output * 3)
        if sub_agent and n == 1:
            t.prompt("Sub-task: look around", sidechain=True)
            t.response(f"msg_{n}s", text("Looked around."), sidechain=True)
        t.response(f"msg_{n}b", text(f"Step {n} passes."))
    return t
