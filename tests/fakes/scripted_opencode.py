"""A coding task scripted for the real OpenCode CLI (``tests/clients/opencode.py``), played by
``ScriptedModel(coding_task(workdir, content=…), is_main=is_opencode_main)``.

OpenCode's tools are its own (``bash``, ``read``, ``write``, ``edit``, ``glob``, ``grep``,
``todowrite`` …, their inputs in camelCase: ``filePath``, ``oldString``); besides its conversation it
asks for a title (another system prompt, no tools), which gets the scripted side reply.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.fakes.scripted_model import text, thinking, tool_use

DRAFT = " (draft)"
# About 28 KB in 900 lines: under OpenCode's own cut of a command's output (2,000 lines or 50 KB).
LARGE = "seq -f '%05g: a line of a large output' 1 900"


def is_opencode_main(body: Mapping[str, Any]) -> bool:
    """OpenCode's own conversation: the one that offers its ``bash`` and ``write`` tools."""
    tools = body.get("tools") or []
    return {"bash", "write"} <= {t.get("name") for t in tools if isinstance(t, dict)}


def _todos(*statuses: str) -> dict[str, Any]:
    steps = ("Look at the working directory", "Write the file", "Check the file")
    return {"todos": [{"content": s, "status": st, "priority": "high"} for s, st in zip(steps, statuses, strict=True)]}


def coding_task(workdir: str, *, filename: str = "result.txt", content: str) -> list[list[dict[str, Any]]]:
    """Eleven turns (twelve requests of the conversation with the answer that ends it): a thought and
    a plan (``todowrite``), parallel tool calls (one of them failing to read a missing file), a
    failing command beside a large output (about 28 KB), the file written as a draft, read, edited
    into ``content``, checked by command, listed and read at once, and the plan done."""
    path = f"{workdir}/{filename}"
    return [
        [
            thinking("The user wants a file written. Plan it, then look around first."),
            text("I'll plan this first."),
            tool_use("todowrite", _todos("in_progress", "pending", "pending"), key="oc0-plan"),
        ],
        [
            tool_use("bash", {"command": "ls -la", "description": "List the working directory"}, key="oc1-ls"),
            tool_use("read", {"filePath": f"{workdir}/missing.txt"}, key="oc1-read"),
        ],
        [
            tool_use("bash", {"command": "cat does-not-exist.txt", "description": "A failing command"}, key="oc2-fail"),
            tool_use("bash", {"command": LARGE, "description": "A large output"}, key="oc2-seq"),
        ],
        [tool_use("todowrite", _todos("completed", "in_progress", "pending"), key="oc3-plan")],
        [tool_use("write", {"filePath": path, "content": content.rstrip("\n") + DRAFT + "\n"}, key="oc4-write")],
        [tool_use("read", {"filePath": path}, key="oc5-read")],
        [tool_use("edit", {"filePath": path, "oldString": DRAFT, "newString": ""}, key="oc6-edit")],
        [
            text("Now check it."),
            tool_use("bash", {"command": f"cat {filename}", "description": "Show the file"}, key="oc7-cat"),
        ],
        [
            tool_use("bash", {"command": "ls *.txt", "description": "List the text files"}, key="oc8-ls"),
            tool_use("read", {"filePath": path}, key="oc8-read"),
        ],
        [tool_use("bash", {"command": f"wc -c {filename}", "description": "Count its bytes"}, key="oc9-wc")],
        [tool_use("todowrite", _todos("completed", "completed", "completed"), key="oc10-plan")],
    ]
