"""A coding task scripted for the real Codex CLI (``tests/clients/codex.py``) against the fake Responses
API: ``server.responses.set_responder(ScriptedCodex())``.

Two user turns (``codex exec PROMPT``, then ``codex exec resume --last FOLLOW_UP``), eleven requests:
thoughts (reasoning items with a summary and sealed content), commentary, parallel ``exec_command``
calls running real commands in the working directory (one failing, one with a large output), the
freeform ``apply_patch`` tool creating and then editing files, and a final answer a turn.

Each answer is decided from the request alone: the user turn is the newest user prompt the script
knows, the step the number of the script's thoughts after it (a retried request gets the same step).
Codex compacting gets ``SUMMARY`` with the step reached, so the turn goes on where it stopped: as
text when it asks for a summary (local compaction, with a provider of its own), as the sealed
content of a ``compaction`` item when its input ends with ``compaction_trigger`` (remote
compaction v2, with the built-in OpenAI provider).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.openai_responses import (
    Item,
    asks_to_compact,
    compaction,
    custom_tool_call,
    function_call,
    message,
    reasoning,
)

PROMPT = "Create greet.py that prints a greeting, run it, and report what it printed."
FOLLOW_UP = "Now add a test for greet.py and run it."
FINAL = "greet.py prints 'hello from codex'."
FINAL_FOLLOW_UP = "test_greet.py passes."
SIDE_REPLY = "Scripted answer to a side request."
COMPACTION_ASK = "CONTEXT CHECKPOINT COMPACTION"
SUMMARY = "Summary: greet.py was written and run; the scripted task reached step {step} of turn {turn}."
_SUMMARY = re.compile(r"reached step (\d+) of turn (\d+)")
# About 20 KB of output: a tool result that weighs in the context.
LARGE = "seq -f '%05g: a line of a large output' 1 700"


def _exec(cmd: str, key: str) -> Item:
    return function_call("exec_command", {"cmd": cmd, "yield_time_ms": 10000}, call_id=f"call_{key}")


def _patch(body: str, key: str) -> Item:
    return custom_tool_call("apply_patch", f"*** Begin Patch\n{body}*** End Patch\n", call_id=f"call_{key}")


def _thought(summary: str, turn: int, step: int) -> Item:
    return reasoning(summary, encrypted=base64.b64encode(f"scripted:{turn}:{step}".encode()).decode())


def turns() -> dict[str, list[list[Item]]]:
    """The steps of each user turn, by the prompt that opens it (each step opens with a thought)."""
    first: list[tuple[str, list[Item]]] = [
        ("Look at the directory first; a README may say how to greet.", [
            message("I'll look at the working directory first.", phase="commentary"),
            _exec("ls -la", "ls"), _exec("cat README.md", "readme"),
        ]),
        ("No README. Write the script with apply_patch.",
         [_patch("*** Add File: greet.py\n+print('hello')\n", "add")]),
        ("Run it.", [_exec("python3 greet.py", "run1")]),
        ("The greeting should name Codex; edit the line.", [
            _patch("*** Update File: greet.py\n@@\n-print('hello')\n+print('hello from codex')\n", "edit"),
        ]),
        ("Run it again and count its lines at once.",
         [_exec("python3 greet.py", "run2"), _exec("wc -l greet.py", "wc")]),
        ("A large listing, to see the output is kept.", [_exec(LARGE, "large")]),
    ]  # fmt: skip
    second: list[tuple[str, list[Item]]] = [
        ("A test next to the script.", [
            _patch("*** Add File: test_greet.py\n+import subprocess\n+out = subprocess.run(['python3', 'greet.py'],"
                   " capture_output=True, text=True).stdout\n+assert out == 'hello from codex\\n', out\n+print('ok')\n",
                   "test"),
        ]),
        ("Run the test.", [_exec("python3 test_greet.py", "test_run")]),
        ("List what is there now.", [_exec("ls", "ls2")]),
    ]  # fmt: skip
    return {
        PROMPT: [[_thought(t, 1, n), *items] for n, (t, items) in enumerate(first)],
        FOLLOW_UP: [[_thought(t, 2, n), *items] for n, (t, items) in enumerate(second)],
    }


def _texts(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))


def _is_user_message(item: object) -> bool:
    return isinstance(item, dict) and item.get("type", "message") == "message" and item.get("role") == "user"


def _is_scripted_thought(item: object, turn: int) -> bool:
    if not isinstance(item, dict) or item.get("type") != "reasoning":
        return False
    sealed = str(item.get("encrypted_content") or "")
    return base64.b64decode(sealed.encode(), validate=False).startswith(f"scripted:{turn}:".encode())


def _summary(item: object) -> str:
    if _is_user_message(item):
        return _texts(item)  # type: ignore[arg-type]
    if isinstance(item, dict) and item.get("type") == "compaction":
        return base64.b64decode(str(item.get("encrypted_content") or "").encode()).decode(errors="replace")
    return ""


@dataclass
class ScriptedCodex:
    script: Mapping[str, Sequence[Sequence[Item]]] = field(default_factory=turns)
    finals: Mapping[str, str] = field(default_factory=lambda: {PROMPT: FINAL, FOLLOW_UP: FINAL_FOLLOW_UP})
    summaries: int = field(default=0, init=False)
    side_requests: int = field(default=0, init=False)

    def __call__(self, body: Mapping[str, Any]) -> list[Item]:
        items = body.get("input")
        items = items if isinstance(items, list) else []
        users = [(n, _texts(i)) for n, i in enumerate(items) if _is_user_message(i)]
        if users and COMPACTION_ASK in users[-1][1]:
            self.summaries += 1
            turn, step = self.progress(items[: users[-1][0]])
            return [message(SUMMARY.format(step=step, turn=turn))]
        if asks_to_compact(body):
            self.summaries += 1
            turn, step = self.progress(items)
            return [compaction(SUMMARY.format(step=step, turn=turn))]
        turn, step = self.progress(items)
        prompt = list(self.script)[turn - 1] if turn else None
        if prompt is None:
            self.side_requests += 1
            return [message(SIDE_REPLY)]
        steps = self.script[prompt]
        if step < len(steps):
            return [dict(i) for i in steps[step]]
        return [message(self.finals.get(prompt, FINAL), phase="final_answer")]

    def progress(self, items: Sequence[Any]) -> tuple[int, int]:
        """(user turn, steps done in it) of the conversation ``items``: the turn of the newest prompt
        of the script; the steps, the script's thoughts after it plus those a summary reports."""
        prompts = list(self.script)
        found = [(n, prompts.index(_texts(i).strip()) + 1) for n, i in enumerate(items)
                 if _is_user_message(i) and _texts(i).strip() in prompts]  # fmt: skip
        if not found:
            return 0, 0
        start, turn = found[-1]
        done = 0
        for item in items[start + 1 :]:
            summary = _SUMMARY.search(_summary(item))
            if summary and int(summary.group(2)) == turn:
                done = int(summary.group(1))
            done += _is_scripted_thought(item, turn)
        return turn, done
