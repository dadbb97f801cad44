"""Facts a checkpoint carries verbatim, read from the structure of the session — no model, no guessing.

What an agent needs to go on after a compaction, and what summaries (a model's or anyone's) lose:

- ``first_request``: the first message a person typed, verbatim;
- ``user_messages``: every later one, verbatim, oldest first (``user_messages_cut`` counts the oldest
  ones a budget dropped);
- ``todos``: the latest todo list the agent wrote with its todo tools (Claude Code's ``TodoWrite``,
  its newer ``TaskCreate`` / ``TaskUpdate``, OpenCode's ``todowrite``, Codex's ``update_plan``…),
  each item with its status;
- ``files_modified`` (by the editing tools, ``apply_patch`` included) and ``files_read``;
- ``commands``: each command run, with the outcome of its last run;
- ``errors``: the error lines of failing runs that no later run of the same command fixed;
- ``decisions``: lines under an explicit marker (``## Decision:``, ``ADR-n``) only;
- ``current_work``: the newest assistant text;
- ``recent_prose``: the newest three pieces of prose, the user's or the assistant's, word for word
  (``compaction.prose``); a budget never cuts them.

A run fails when its result says so structurally (``is_error``, a non-zero exit code, a traceback, a
test runner's failure summary, a result starting with "Error"); a line is never an error because it
contains a word. ``facts_update`` folds new messages into the previous checkpoint's facts, so what
an earlier compaction recorded survives the next one; ``fit_facts`` makes them fit a token budget.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .injected import typed_text
from .numbers import whole_number
from .prose import fold_prose, quotes, render_prose
from .reversible import MARK, is_human_prompt, message_text, result_text
from .tokens import Tokenizer
from .types import Msg

WRITE_TOOLS = frozenset(
    {
        "write",
        "edit",
        "multiedit",
        "notebookedit",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "create_file",
        "write_file",
        "edit_file",
        "apply_patch",
        "replace",
        "create",
        "insert",
        "patch",
    }
)
READ_TOOLS = frozenset({"read", "notebookread", "read_file", "view", "open", "view_file", "cat"})
EDITOR_READ_COMMANDS = frozenset({"view", "read"})  # the text editor tools' commands that change nothing
PATH_KEYS = ("file_path", "filePath", "path", "notebook_path", "filename", "file", "target_file")
TODO_TOOLS = frozenset({"todowrite", "todo_write", "write_todos", "todowritetool", "update_plan", "todo"})
TASK_CREATE, TASK_UPDATE = "taskcreate", "taskupdate"
TODO_ITEM_KEYS = ("content", "description", "title", "task", "step", "text", "subject")
PATCH_FILE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.MULTILINE)
TASK_NUMBER = re.compile(r"Task #(\w+)")

# What marks a failed run, read from its result's structure. An exit code is ASCII digits of any
# length: it is compared with zero as text, never read by ``int()``.
EXIT_CODE = re.compile(
    r"^\s*(?:exit code|exit status|process exited with code|exited with code)[:\s]+-?([0-9]+)", re.I | re.M
)
TEST_FAILURE = re.compile(r"^(?:FAILED\b|FAIL\b|npm ERR!)|\b[1-9]\d* (?:failed|failures?)\b", re.M)
ERROR_LINE = re.compile(r"error|fail|exception|traceback|fatal|panic", re.I)
ERRORS_PER_RUN = 10  # the last error lines of one failing run; its end holds the summary
LINE_CHARS = 500
COMMAND_CHARS = 300
CURRENT_WORK_CHARS = 2_000
MAX_COMMANDS = 40
MAX_ERRORS = 5  # unresolved failing runs kept, newest last
MAX_FILES = 200
FIRST_REQUEST_FLOOR = 2_000  # characters: a budget never cuts the first request shorter than this


def empty_facts() -> dict[str, Any]:
    return {
        "first_request": "",
        "user_messages": [],
        "user_messages_cut": 0,
        "todos": [],
        "files_modified": [],
        "files_read": [],
        "commands": [],
        "errors": [],
        "decisions": [],
        "current_work": "",
        "recent_prose": [],
    }


def is_person(msg: Msg) -> bool:
    """A message a person typed: a user message with words of theirs, not only what the agent's
    harness injected (``compaction.injected``) or a line flagged as such (``meta``)."""
    if not is_human_prompt(msg) or msg.flags.get("meta"):
        return False
    text = person_text(msg)
    return bool(text) and not text.startswith(MARK)


def person_text(msg: Msg) -> str:
    """The user's own words in ``msg``, verbatim: what the harness injected around them is left out."""
    return typed_text(msg.content)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cut_middle(text: str, keep: int) -> str:
    """``text`` with its middle left out so about ``keep`` characters remain, saying how many went."""
    if len(text) <= keep:
        return text
    gone = len(text) - keep
    return f"{text[: keep - keep // 2]}\n[… {gone:,} characters of this message left out …]\n{text[-(keep // 2) :]}"


def _blocks(msg: Msg) -> list[dict[str, Any]]:
    return [b for b in msg.content if isinstance(b, dict)] if isinstance(msg.content, list) else []


def run_key(name: str, args: Any) -> str:
    """What makes two tool calls runs of the same thing: the tool and its command, else its input."""
    if isinstance(args, dict):
        command = args.get("command") if isinstance(args.get("command"), str) else args.get("cmd")
        if isinstance(command, str) and command.strip():
            return f"{name.lower()}:{' '.join(command.split())}"
    return f"{name.lower()}:{json.dumps(args, sort_keys=True, ensure_ascii=False, default=str)}"


def run_failed(block: dict[str, Any]) -> bool:
    """Whether a tool result reports a failure: the flag, an exit code, a traceback, a test summary,
    or a result that starts with "Error" — never a word somewhere in the output."""
    if block.get("is_error") is True:
        return True
    text = result_text(block.get("content"))
    codes: list[str] = EXIT_CODE.findall(text)
    if codes:
        return codes[-1].strip("0") != ""
    if "Traceback (most recent call last)" in text:
        return True
    head = text.lstrip()[:12].lower()
    if head.startswith(("error:", "error ", "fatal:")):
        return True
    return bool(TEST_FAILURE.search(text))


def error_lines(block: dict[str, Any]) -> list[str]:
    """The lines a failing run's result reports its errors in: the last few that say so, else its first."""
    lines = [line.strip() for line in result_text(block.get("content")).splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(MARK)]
    hits = [line for line in lines if ERROR_LINE.search(line)]
    chosen = hits[-ERRORS_PER_RUN:] if hits else lines[:1]
    return [_cut(line, LINE_CHARS) for line in chosen]


def _todo_items(name: str, args: dict[str, Any]) -> list[dict[str, str]] | None:
    raw = args.get("todos") if name != "update_plan" else args.get("plan")
    if raw is None:
        raw = args.get("todos") or args.get("plan") or args.get("items")
    if not isinstance(raw, list):
        return None
    items = []
    for entry in raw:
        if isinstance(entry, str):
            items.append({"content": entry.strip(), "status": "pending"})
            continue
        if not isinstance(entry, dict):
            continue
        text = next((entry[k] for k in TODO_ITEM_KEYS if isinstance(entry.get(k), str) and entry[k].strip()), "")
        if text:
            item = {"content": text.strip(), "status": str(entry.get("status") or "pending")}
            if entry.get("id") is not None:
                item["id"] = str(entry["id"])
            items.append(item)
    return items


def _paths(name: str, args: Any) -> list[str]:
    if not isinstance(args, dict):
        return []
    if name == "apply_patch" or name == "patch":
        patch = next((v for v in args.values() if isinstance(v, str) and "*** " in v), "")
        found = PATCH_FILE.findall(patch)
        if found:
            return [p.strip() for p in found]
    paths = [args[k].strip() for k in PATH_KEYS if isinstance(args.get(k), str) and args[k].strip()]
    edits = args.get("edits")
    if isinstance(edits, list):  # MultiEdit-like tools naming a file per edit
        paths += [e[k] for e in edits if isinstance(e, dict) for k in PATH_KEYS if isinstance(e.get(k), str)]
    return paths[:1] if paths and name != "multiedit" else list(dict.fromkeys(paths))


class _Facts:
    """The facts so far, updated message by message."""

    def __init__(self, previous: dict[str, Any] | None) -> None:
        prev = {**empty_facts(), **(previous or {})}
        self.first_request: str = str(prev["first_request"] or "")
        self.user_messages: list[str] = [str(t) for t in prev["user_messages"]]
        self.cut: int = int(prev["user_messages_cut"] or 0)
        self.todos: list[dict[str, str]] = [dict(t) for t in prev["todos"] if isinstance(t, dict)]
        self.modified: dict[str, str] = {f["path"]: f.get("what", "") for f in prev["files_modified"] if f.get("path")}
        self.read: list[str] = [str(p) for p in prev["files_read"]]
        self.commands: dict[str, dict[str, Any]] = {c["key"]: dict(c) for c in prev["commands"] if c.get("key")}
        self.errors: dict[str, dict[str, Any]] = {e["key"]: dict(e) for e in prev["errors"] if e.get("key")}
        self.decisions: list[dict[str, str]] = [dict(d) for d in prev["decisions"] if isinstance(d, dict)]
        self.current_work: str = str(prev["current_work"] or "")
        self.calls: dict[str, tuple[str, Any]] = {}  # tool_use id → (name, input), for the results
        earlier = prev["recent_prose"]
        self.prose = fold_prose(earlier if isinstance(earlier, list) else [], [])

    def add(self, msg: Msg) -> None:
        self.prose = fold_prose(self.prose, [msg])
        if is_person(msg):
            text = person_text(msg)
            if not self.first_request:
                self.first_request = text
            else:
                self.user_messages.append(text)
        if msg.role == "assistant":
            text = message_text(msg.content).strip()
            if text and not text.startswith(MARK):
                self.current_work = _cut(text, CURRENT_WORK_CHARS)
        if msg.role in ("assistant", "user"):
            self._decisions(message_text(msg.content))
        for block in _blocks(msg):
            if block.get("type") == "tool_use":
                self._call(str(block.get("id", "")), str(block.get("name", "")), block.get("input"))
            elif block.get("type") == "tool_result":
                self._result(block)

    def _decisions(self, text: str) -> None:
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("## Decision:") or re.match(r"^ADR-\d+\b", stripped):
                decision, _, why = stripped.removeprefix("## Decision:").strip().partition(" because ")
                entry = {"decision": _cut(decision.strip() or stripped, LINE_CHARS), "rationale": _cut(why, LINE_CHARS)}
                if entry not in self.decisions:
                    self.decisions.append(entry)

    def _call(self, call_id: str, name: str, args: Any) -> None:
        lowered = name.lower()
        self.calls[call_id] = (name, args)
        if not isinstance(args, dict):
            return
        if lowered in TODO_TOOLS:
            items = _todo_items(lowered, args)
            if items is not None:
                self.todos = items
        elif lowered == TASK_CREATE and not any(t.get("call") == call_id for t in self.todos):
            # Folding the same messages twice (a list read over a summary's kept tail, then again when
            # those messages are summarized) must not create a task twice: items remember their call.
            subject = next((args[k] for k in ("subject", "title", "description") if isinstance(args.get(k), str)), "")
            if subject.strip():
                # Ids are whatever the agent wrote ("²", "step-3"); only plain numbers count here.
                numbers = [n for t in self.todos if (n := whole_number(t.get("id"))) is not None]
                number = str(max(numbers, default=0) + 1)
                self.todos.append({"id": number, "content": subject.strip(), "status": "pending", "call": call_id})
        elif lowered == TASK_UPDATE:
            self._task_update(args)
        editor_read = isinstance(args.get("command"), str) and args["command"] in EDITOR_READ_COMMANDS
        if lowered in WRITE_TOOLS and not editor_read:
            for path in _paths(lowered, args):
                self.modified.pop(path, None)  # re-inserted: the most recently modified last
                self.modified[path] = name
        elif lowered in READ_TOOLS or (lowered in WRITE_TOOLS and editor_read):
            for path in _paths(lowered, args):
                if path in self.read:
                    self.read.remove(path)
                self.read.append(path)

    def _task_update(self, args: dict[str, Any]) -> None:
        task_id = str(args.get("taskId") or args.get("task_id") or args.get("id") or "")
        for item in self.todos:
            if item.get("id") == task_id:
                if args.get("status") == "deleted":
                    self.todos.remove(item)
                    return
                if isinstance(args.get("status"), str):
                    item["status"] = args["status"]
                if isinstance(args.get("subject"), str) and args["subject"].strip():
                    item["content"] = args["subject"].strip()
                return

    def _result(self, block: dict[str, Any]) -> None:
        name, args = self.calls.get(str(block.get("tool_use_id", "")), ("", None))
        if not name:
            return
        lowered = name.lower()
        if lowered == TASK_CREATE:  # the tool numbers its tasks: take its number when it says it
            found = TASK_NUMBER.search(result_text(block.get("content")))
            for item in self.todos:
                if found and item.get("call") == block.get("tool_use_id"):
                    item["id"] = found.group(1)
        if lowered in TODO_TOOLS or lowered in (TASK_CREATE, TASK_UPDATE):
            return
        failed = run_failed(block)
        key = run_key(name, args)
        command = args.get("command") if isinstance(args, dict) else None
        is_command = isinstance(command, str) and lowered not in WRITE_TOOLS
        if is_command:
            label = _cut(" ".join(str(command).split()), COMMAND_CHARS)
            self.commands.pop(key, None)
            self.commands[key] = {"key": key, "command": label, "ok": not failed}
        if failed:
            label = _cut(" ".join(str(command).split()), COMMAND_CHARS) if is_command else f"{name} {_args(args)}"
            self.errors.pop(key, None)
            self.errors[key] = {"key": key, "run": label, "lines": error_lines(block)}
        else:
            self.errors.pop(key, None)  # a later run of the same thing passed: fixed

    def as_dict(self) -> dict[str, Any]:
        files = [{"path": p, "what": w} for p, w in self.modified.items()][-MAX_FILES:]
        return {
            "first_request": self.first_request,
            "user_messages": self.user_messages,
            "user_messages_cut": self.cut,
            "todos": self.todos,
            "files_modified": files,
            "files_read": [p for p in self.read if p not in self.modified][-MAX_FILES:],
            "commands": list(self.commands.values())[-MAX_COMMANDS:],
            "errors": list(self.errors.values())[-MAX_ERRORS:],
            "decisions": self.decisions,
            "current_work": self.current_work,
            "recent_prose": self.prose,
        }


def _args(args: Any) -> str:
    return _cut(json.dumps(args, ensure_ascii=False, default=str), COMMAND_CHARS) if args else ""


def facts_update(previous: dict[str, Any] | None, messages: Iterable[Msg]) -> dict[str, Any]:
    """The facts of ``previous`` (an earlier checkpoint's) with ``messages`` folded in, in order."""
    facts = _Facts(previous)
    for msg in messages:
        facts.add(msg)
    return facts.as_dict()


# ----------------------------------------------------------------------------- rendering and budget


def render_facts(facts: dict[str, Any]) -> str:
    """The facts as the model reads them: labelled sections, every quoted text verbatim."""
    lines: list[str] = []
    if facts.get("first_request"):
        lines += ["First request (verbatim):", facts["first_request"]]
    messages = facts.get("user_messages") or []
    cut = int(facts.get("user_messages_cut") or 0)
    if messages or cut:
        note = f"; {cut} older ones omitted" if cut else ""
        lines.append(f"Later user messages (verbatim, oldest first{note}):")
        lines += [f"[{i}] {text}" for i, text in enumerate(messages, start=1)]
    if facts.get("todos"):
        lines.append("Todo list (latest):")
        lines += [f"- [{t.get('status', 'pending')}] {t.get('content', '')}" for t in facts["todos"]]
    if facts.get("files_modified"):
        lines.append("Files modified: " + ", ".join(f["path"] for f in facts["files_modified"]))
    if facts.get("files_read"):
        lines.append("Files read: " + ", ".join(facts["files_read"]))
    if facts.get("commands"):
        lines.append("Commands run (last outcome):")
        lines += [f"- {'ok' if c.get('ok') else 'FAILED'}: {c.get('command', '')}" for c in facts["commands"]]
    if facts.get("errors"):
        lines.append("Unresolved errors (the last failing run of each, not fixed by a later run):")
        for error in facts["errors"]:
            lines.append(f"- {error.get('run', '')}:")
            lines += [f"  {line}" for line in error.get("lines") or []]
    if facts.get("decisions"):
        lines.append("Decisions (marked in the session):")
        lines += [
            f"- {d['decision']}" + (f" (why: {d['rationale']})" if d.get("rationale") else "")
            for d in facts["decisions"]
        ]
    prose = facts.get("recent_prose") or []
    work = str(facts.get("current_work") or "")
    if work and not quotes(prose, work):
        lines += ["Current work (the newest assistant text):", work]
    quoted = [str(facts.get("first_request") or ""), *messages]
    lines += render_prose(prose, label="Last said before this summary", quoted=quoted)
    return "\n".join(lines)


def fit_facts(facts: dict[str, Any], tokenizer: Tokenizer, budget: int) -> dict[str, Any]:
    """The facts cut to ``budget`` tokens of rendered text. What goes first: files read, commands, the
    current work's length (the kept tail holds newer work), older unresolved errors, then the oldest
    user messages (counted in ``user_messages_cut``); the first request (whole unless it alone is
    larger than its room, never below ``FIRST_REQUEST_FLOOR`` characters), the todo list, the files
    modified and the newest error stay longest. Facts that cannot be cut further may stay over the
    budget; the caller counts them."""
    out: dict[str, Any] = {k: (list(v) if isinstance(v, list) else v) for k, v in facts.items()}

    def size() -> int:
        return tokenizer.count_lines(render_facts(out))  # counted again after each cut: its lines kept

    current = size()
    for name, floor in (("files_read", 0), ("commands", 0)):
        current = _drop_oldest(out, name, floor, current, budget, size)
    while current > budget and len(out.get("current_work") or "") > 200:  # the tail holds newer work
        out["current_work"] = _cut(out["current_work"], len(out["current_work"]) // 2)
        current = size()
    for name, floor in (("errors", 1), ("decisions", 0), ("user_messages", 0)):
        current = _drop_oldest(out, name, floor, current, budget, size)
    # The first request stays whole while it fits beside what is left; only one larger than all the
    # room it has (a spec pasted into a small window) is cut, in the middle, to that room: its start
    # says what the task is, its end what the user asked of it.
    first = str(out.get("first_request") or "")
    if current > budget and len(first) > FIRST_REQUEST_FLOOR:
        room = budget - tokenizer.count_text(render_facts({**out, "first_request": ""}))
        keep = max(FIRST_REQUEST_FLOOR, len(first) * room // max(1, tokenizer.count_text(first)))
        if keep < len(first):
            out["first_request"] = cut_middle(first, keep)
            current = size()
    if current > budget and out.get("files_modified"):
        keep = max(1, len(out["files_modified"]) // 2)
        out["files_modified"] = out["files_modified"][-keep:]
    return out


def _drop_oldest(out: dict[str, Any], name: str, floor: int, current: int, budget: int, size: Callable[[], int]) -> int:
    """Drop the oldest entries of one list (several at once when far over) down to ``floor``."""
    while current > budget and len(out.get(name) or []) > floor:
        drop = max(1, min(len(out[name]) - floor, (current - budget) // 60))
        del out[name][:drop]
        if name == "user_messages":
            out["user_messages_cut"] = int(out.get("user_messages_cut") or 0) + drop
        current = size()
    return current


def has_facts(facts: dict[str, Any] | None) -> bool:
    return bool(facts) and any(v for k, v in facts.items() if k != "user_messages_cut")  # type: ignore[union-attr]


def person_messages(messages: Sequence[Msg]) -> list[str]:
    return [person_text(m) for m in messages if is_person(m)]


def checkpoint_facts(
    previous: dict[str, Any] | None, messages: Iterable[Msg], tokenizer: Tokenizer, budget: int
) -> dict[str, Any]:
    """The facts a new checkpoint over ``messages`` carries: the previous checkpoint's with these
    folded in, cut to ``budget`` tokens."""
    return fit_facts(facts_update((previous or {}).get("facts"), messages), tokenizer, budget)
