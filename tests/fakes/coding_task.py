"""A longer scripted coding task for the real Claude Code CLI: 20+ requests of its main conversation
and a subagent of its own, with what real sessions hold (thoughts, parallel tool calls, failing
commands, large outputs, deferred tools found with ToolSearch, tasks, files written, edited and read).

``ScriptedConversations`` plays one script per conversation, chosen by the words of the
conversation's first user message (the user's prompt for the main one, the prompt the main one gave
its subagent for the subagent); any other request (a title, a check) gets plain text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.scripted_model import FINAL_REPLY, SIDE_REPLY, assistant_turns, text, thinking, tool_use

PROMPT = "Write a small Python script that prints the squares of 1 to 5 into squares.py, run it, and report."
SUBAGENT_PROMPT = "Count the lines of squares.py in the working directory and answer with the number only."
SUBAGENT_ANSWER = "5"
COMPACT_SUMMARY = "The user asked for squares.py; it was written, edited, run and its output saved."
AFTER_COMPACT = "What did you do so far?"
Turns = Sequence[Sequence[Mapping[str, Any]]]


def asks_for_summary(body: Mapping[str, Any]) -> bool:
    """Claude Code's request to summarize its conversation (``/compact``): its instruction is the last
    user message."""
    messages = body.get("messages") or []
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    return last.get("role") == "user" and "create a detailed summary of the conversation" in str(last.get("content"))


def first_user_words(body: Mapping[str, Any]) -> str:
    for message in body.get("messages") or []:
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            blocks = content if isinstance(content, list) else []
            return "\n".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
    return ""


@dataclass
class ScriptedConversations:
    """``scripts``: the words that open a conversation → its turns (then ``finals`` for it, or the
    default final answer)."""

    scripts: Mapping[str, Turns]
    finals: Mapping[str, str] = field(default_factory=dict)
    side_requests: int = field(default=0, init=False)
    summaries: int = field(default=0, init=False)
    played: dict[str, int] = field(default_factory=dict, init=False)

    def __call__(self, body: Mapping[str, Any]) -> dict[str, Any]:
        if asks_for_summary(body):  # the client compacting its conversation
            self.summaries += 1
            return {"content": [text(f"<summary>{COMPACT_SUMMARY}</summary>")], "stop_reason": "end_turn"}
        words = first_user_words(body)
        opening = next((k for k in self.scripts if k in words), None)
        if opening is None:
            self.side_requests += 1
            return {"content": [text(SIDE_REPLY)], "stop_reason": "end_turn"}
        turns = self.scripts[opening]
        n = assistant_turns(body)
        self.played[opening] = max(self.played.get(opening, 0), n + 1)
        if n < len(turns):
            return {"content": [dict(b) for b in turns[n]]}
        return {"content": [text(self.finals.get(opening, FINAL_REPLY))], "stop_reason": "end_turn"}


def coding_task(workdir: str) -> ScriptedConversations:
    script = f"{workdir}/squares.py"
    bash = lambda command, key: tool_use("Bash", {"command": command, "description": key}, key=key)  # noqa: E731
    main: list[list[dict[str, Any]]] = [
        [
            thinking("A small script. Look at the directory first, and check for an existing file."),
            text("I'll look at the working directory first."),
            bash("ls -la", "list"),
            tool_use("Read", {"file_path": script}, key="read-missing"),
        ],
        [
            bash("cat /nonexistent/ctxweb-notes", "fail-cat"),
            bash("seq 1 4000", "large-output"),
            tool_use("ToolSearch", {"query": "select:TaskCreate,TaskUpdate"}, key="search"),
        ],
        [
            tool_use(
                "TaskCreate",
                {"subject": "Write squares.py", "description": "The script", "activeForm": "Writing squares.py"},
                key="task-1",
            ),
            tool_use(
                "TaskCreate",
                {"subject": "Run it", "description": "Check the output", "activeForm": "Running squares.py"},
                key="task-2",
            ),
        ],
        [
            thinking("Write the script with a loop over range(1, 6)."),
            tool_use(
                "Write", {"file_path": script, "content": "for n in range(1, 6):\n    print(n * n)\n"}, key="write"
            ),
        ],
        [bash(f"python3 {script}", "run-1")],
        [tool_use("Read", {"file_path": script}, key="read-1")],
        [
            text("I'll make the output say what it is."),
            tool_use(
                "Edit",
                {"file_path": script, "old_string": "print(n * n)", "new_string": "print(n, n * n)"},
                key="edit",
            ),
        ],
        [bash(f"python3 {script}", "run-2")],
        [bash(f"python3 {script} | wc -l", "count-output")],
        [
            tool_use(
                "Agent",
                {"description": "Count lines", "prompt": SUBAGENT_PROMPT, "subagent_type": "general-purpose"},
                key="agent",
            ),
        ],
        [bash("python3 -c 'import sys; sys.exit(3)'", "fail-exit")],
        [bash(f"grep -n print {script}", "grep")],
        [bash(f"head -c 200 {script}", "head")],
        [bash("seq 1 2500 | sed 's/$/ squared/'", "large-2")],
        [
            thinking("Both runs worked; mark the tasks done."),
            tool_use("TaskUpdate", {"taskId": "1", "status": "completed"}, key="task-1-done"),
            tool_use("TaskUpdate", {"taskId": "2", "status": "completed"}, key="task-2-done"),
        ],
        [bash(f"wc -c {script}", "size")],
        [bash(f"python3 {script} > {workdir}/squares.txt", "save")],
        [tool_use("Read", {"file_path": f"{workdir}/squares.txt"}, key="read-out")],
        [bash(f"ls -la {workdir}", "list-2")],
        [bash(f"cat {workdir}/squares.txt | tail -n 1", "tail")],
        [text("Checking the script once more."), tool_use("Read", {"file_path": script}, key="read-2")],
        [bash("echo done", "done")],
    ]
    # With thinking on, the API wants a tool loop's first step to open with a thought.
    subagent: list[list[dict[str, Any]]] = [[thinking("Count them with wc."), bash(f"wc -l < {script}", "sub-wc")]]
    return ScriptedConversations(
        scripts={PROMPT: main, SUBAGENT_PROMPT: subagent},
        finals={PROMPT: "squares.py prints 1 1, 2 4, 3 9, 4 16 and 5 25.", SUBAGENT_PROMPT: SUBAGENT_ANSWER},
    )
