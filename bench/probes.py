"""Continuation probes: can an agent carry on from the context it receives after a compaction?

Pure Python (the standard library, and the engine's rules for what a harness injects into a user's
text, ``compaction/injected.py``), so every probe is unit-tested without a database
(tests/bench/test_probes.py). The ground truth is what the benchmark itself sent — the canonical
messages (``{"role", "content", "metadata"?}``, Anthropic-style blocks) of a transcript up to the
compaction point — never what the service says it kept. A probe is scored as ``Score(passed,
total)`` over its items; ``total == 0`` means the probe does not apply at that point (no todo list
yet, no unresolved failure…) and is left out of every share.

1. ``first_request``: the first human message is there verbatim.
2. ``human_messages``: every human message is there verbatim (one item each).
3. ``todo_items``: every item of the latest todo list is there with its status: its text with the
   nearest status word on the same line being its status (``[in_progress] Fix parser``,
   ``Fix parser (completed)``, the JSON of a todo call), or the todo calls that set it still in the
   context as calls.
4. ``files_modified``: every file a write tool changed so far is named (tool inputs count).
5. ``last_three``: the last three messages of the context just before the run are in the context
   after it, unchanged (same role and content; a turn may have been merged with a neighbour, so
   its blocks need only appear as one contiguous run of an after-turn's blocks).
6. ``error_lines``: the error lines of the newest failing run that no later run fixed are there.
7. ``no_overflow``: usage after the run is at most the policy's ``target_after``, or STATUS says the
   run stepped up to handoff because the window can't hold what must stay (issue 30).
8. ``last_prose``: the last three pieces of prose before the run are there verbatim (one item each).

Definitions:

- A *human message* is a user message with non-empty text (its text blocks joined by newlines,
  outer whitespace stripped) that a person typed: not only tool results, not a line Claude Code
  injected (``isMeta``, ``isCompactSummary``, ``isVisibleInTranscriptOnly``; the markers in
  ``INJECTED_PREFIXES``), not a ctxweb placeholder (``[ctxweb:``). "There verbatim" is an exact
  substring of the context's message texts (text blocks and string contents, the summary message
  included; tool results and inputs are not searched).
- The *todo list* is the newest list a todo tool set: ``TodoWrite`` / ``todowrite`` / ``todo_write``
  (``todos: [{content, status}]``) and ``update_plan`` (``plan: [{step, status}]``) replace it;
  ``TaskCreate`` (``subject``) adds a pending task, numbered in order unless its result names the
  number (``Task #N``); ``TaskUpdate`` (``taskId``, ``status``, ``subject``) changes one, ``deleted``
  removes it.
- A *modified file* is a path a write tool was given: ``Write``, ``Edit``, ``MultiEdit``,
  ``NotebookEdit`` (``file_path`` / ``notebook_path``), ``str_replace_editor`` /
  ``str_replace_based_edit_tool`` with a writing command (``path``), ``write_file`` / ``edit_file``
  / ``create_file`` (``path`` / ``file_path``), the file lines of an ``apply_patch`` input, and
  SWE-agent's windowed tools (``create`` names its ``filename``; ``edit`` and ``insert`` change the
  file the last ``open`` / ``create`` opened). Shell commands that write files are not counted.
- A *run* is a tool call with its result; its key is the tool's name and its ``command`` argument
  (whitespace normalised) when it has one, else the name and the canonical JSON of its input. A run
  *failed* when its result has ``is_error``, reports a non-zero exit (``Exit code N``, ``exit status
  N``, ``Process exited with code N``), holds a Python traceback or a test runner's ``FAILED`` line
  or ``N failed`` (N > 0), or starts with ``Error:`` (tau-bench's tools answer so). A failing run is
  *fixed* by a later run with the same key that did not fail. Its *error lines*: its non-empty lines
  matching ``error|fail|exception|traceback|fatal|panic``, the last 10 of them, or its first line when
  none match; each must be a substring of the context's whole text (tool results and inputs too).
- A *piece of prose* is a text block (or string content) of an assistant message, outer whitespace
  stripped, or the words a person typed in a text block of a user message that is not flagged as
  injected (``INJECTED_FLAGS``): the block without what the agent's harness writes there
  (``compaction.injected.typed_part``: ``<system-reminder>`` spans, command markup, hook output…);
  never tool output, a tool call or a ctxweb placeholder. "There verbatim" as for human messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction.injected import typed_part

# A model's checkpoint that is valid and names no fact the probes look for: the fake model of the runs
# "with a model" (what ctxweb keeps of a session must not depend on the summarizer naming it).
FACTLESS_CHECKPOINT: dict[str, Any] = {
    "objective": "Carry on with the task the user gave.",
    "completed": ["Worked through the earlier part of the session."],
    "in_progress": [],
    "pending": [],
    "blockers": [],
    "decisions": [],
    "files_modified": [],
    "important_details": [],
    "last_user_request": "",
}

Message = dict[str, Any]

PROBES: tuple[str, ...] = (
    "first_request",
    "human_messages",
    "todo_items",
    "files_modified",
    "last_three",
    "error_lines",
    "no_overflow",
    "last_prose",
)
# Targets of issue 14: the least share of a probe's items that must pass.
TARGETS: dict[str, float] = {
    "first_request": 1.0,
    "human_messages": 0.95,
    "todo_items": 1.0,
    "files_modified": 0.95,
    "last_three": 1.0,
    "error_lines": 0.90,
    "no_overflow": 1.0,
    "last_prose": 1.0,
}

# Lines Claude Code writes into the user's turn on its own (no person typed them).
INJECTED_PREFIXES = (
    "[ctxweb:",
    "[Request interrupted by user",
    "<local-command-stdout>",
    "<local-command-caveat>",
    "<task-notification>",
)
INJECTED_FLAGS = ("is_meta", "is_compact_summary", "visible_in_transcript_only")

TODO_REPLACING = {"TodoWrite": "todos", "todowrite": "todos", "todo_write": "todos", "update_plan": "plan"}
STATUS_WORDS = r"in[ _-]progress|pending|completed|cancell?ed|blocked|done|todo|deleted"
STATUS_REACH = 40  # characters from an item's text within which its status must be written

WRITE_TOOLS_FILE_PATH = {"Write", "Edit", "MultiEdit", "NotebookEdit", "write_file", "edit_file", "create_file"}
EDITOR_TOOLS = {"str_replace_editor", "str_replace_based_edit_tool"}
EDITOR_WRITES = {"create", "str_replace", "insert", "undo_edit"}
PATCH_FILE_LINE = re.compile(r"^\*\*\* (?:Update|Add|Delete) File: (.+?)\s*$", re.MULTILINE)

ERROR_LINE = re.compile(r"error|fail|exception|traceback|fatal|panic", re.IGNORECASE)
MAX_ERROR_LINES = 10
_NONZERO_EXIT = (
    re.compile(r"\bexit code:?\s*(-?\d+)", re.IGNORECASE),
    re.compile(r"\bexit status:?\s*(-?\d+)", re.IGNORECASE),
    re.compile(r"\bprocess exited with code:?\s*(-?\d+)", re.IGNORECASE),
)
_FAILURE_MARKS = (
    re.compile(r"^\s*Traceback \(most recent call last\):", re.MULTILINE),
    re.compile(r"^\s*FAILED\b", re.MULTILINE),
    re.compile(r"\b[1-9]\d* failed\b"),
)


@dataclass(frozen=True)
class Score:
    passed: int
    total: int

    @property
    def applicable(self) -> bool:
        return self.total > 0

    def __add__(self, other: Score) -> Score:
        return Score(self.passed + other.passed, self.total + other.total)


NOT_APPLICABLE = Score(0, 0)


def _check(ok: bool) -> Score:
    return Score(int(ok), 1)


def _share(items: Iterable[bool]) -> Score:
    results = list(items)
    return Score(sum(results), len(results))


# ----------------------------------------------------------------------------- messages


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def result_text(content: Any) -> str:
    """The text of a tool result's content: a string, or the text parts of a list."""
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in _blocks(content) if p.get("type") == "text")


def text_of(message: Message) -> str:
    """A message's text blocks (or string content) joined by newlines, outer whitespace stripped."""
    return "\n".join(str(b.get("text", "")) for b in _blocks(message.get("content")) if b.get("type") == "text").strip()


def is_human(message: Message) -> bool:
    if message.get("role") != "user":
        return False
    metadata = message.get("metadata") or {}
    if any(metadata.get(flag) for flag in INJECTED_FLAGS):
        return False
    text = text_of(message)
    return bool(text) and not text.startswith(INJECTED_PREFIXES)


def prose(message: Message) -> list[str]:
    """The pieces of prose of one message, in order."""
    role = message.get("role")
    metadata = message.get("metadata") or {}
    if role not in ("user", "assistant") or (role == "user" and any(metadata.get(f) for f in INJECTED_FLAGS)):
        return []
    texts = (str(b.get("text", "")) for b in _blocks(message.get("content")) if b.get("type") == "text")
    pieces = (typed_part(text) if role == "user" else text.strip() for text in texts)
    return [piece for piece in pieces if piece and not piece.startswith("[ctxweb:")]


def last_prose(history: Sequence[Message], n: int = 3) -> list[str]:
    """The last ``n`` pieces of prose of the history, oldest first."""
    found: list[str] = []
    for message in reversed(history):
        found[:0] = prose(message)
        if len(found) >= n:
            break
    return found[-n:]


def tool_calls(history: Sequence[Message]) -> list[tuple[int, dict[str, Any]]]:
    """Every tool_use block with the index of its message, in order."""
    return [
        (i, block)
        for i, message in enumerate(history)
        for block in _blocks(message.get("content"))
        if block.get("type") == "tool_use"
    ]


def _results(history: Sequence[Message]) -> dict[str, dict[str, Any]]:
    """tool_use id → its first tool_result block (reused ids are renamed by the readers)."""
    found: dict[str, dict[str, Any]] = {}
    for message in history:
        for block in _blocks(message.get("content")):
            if block.get("type") == "tool_result":
                found.setdefault(str(block.get("tool_use_id")), block)
    return found


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# ----------------------------------------------------------------------------- the context as the model reads it


@dataclass
class ContextView:
    """One context (Anthropic or OpenAI ``messages``) as text: ``texts`` is what the model reads as
    text, ``everything`` adds tool results and tool inputs (their JSON and their string values);
    ``calls`` are the tool calls still there as calls, as (name, canonical JSON of input)."""

    messages: list[Message]
    texts: str
    everything: str
    calls: set[tuple[str, str]] = field(default_factory=set)


def _string_leaves(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _string_leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _string_leaves(v)


def view(messages: Sequence[Message], fmt: str) -> ContextView:
    texts: list[str] = []
    other: list[str] = []
    calls: set[tuple[str, str]] = set()

    def add_call(name: str, arguments: Any) -> None:
        calls.add((name, canonical_json(arguments)))
        other.append(json.dumps(arguments, ensure_ascii=False))
        other.extend(_string_leaves(arguments))

    for message in messages:
        content = message.get("content")
        if fmt == "openai":
            if message.get("role") == "tool":
                other.append(result_text(content))
            else:
                texts.extend(str(b.get("text", "")) for b in _blocks(content) if b.get("type") == "text")
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                raw = function.get("arguments") or "{}"
                try:
                    arguments = json.loads(raw)
                except (TypeError, ValueError):
                    arguments = raw
                add_call(str(function.get("name")), arguments)
            continue
        for block in _blocks(content):
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind == "tool_use":
                add_call(str(block.get("name")), block.get("input", {}))
            elif kind == "tool_result":
                other.append(result_text(block.get("content")))
            elif kind == "thinking":
                other.append(str(block.get("thinking", "")))
    joined = "\n".join(texts)
    return ContextView(list(messages), joined, joined + "\n" + "\n".join(other), calls)


# ----------------------------------------------------------------------------- ground truth: todo list


@dataclass(frozen=True)
class TodoItem:
    content: str
    status: str
    calls: tuple[tuple[str, str], ...]  # the todo calls that set it: (name, canonical JSON of input)


def todo_list(history: Sequence[Message]) -> list[TodoItem] | None:
    """The latest todo list, or None when no todo tool was called so far."""
    results = _results(history)
    items: dict[str, TodoItem] | None = None
    created = 0
    for _, block in tool_calls(history):
        name = str(block.get("name", ""))
        raw = block.get("input")
        args: dict[str, Any] = raw if isinstance(raw, dict) else {}
        call = (name, canonical_json(args))
        if name in TODO_REPLACING:
            entries = args.get(TODO_REPLACING[name])
            items = {}
            for n, entry in enumerate(entries if isinstance(entries, list) else []):
                if not isinstance(entry, dict):
                    continue
                text = str(entry.get("content") or entry.get("step") or entry.get("title") or "").strip()
                if text:
                    items[str(n)] = TodoItem(text, str(entry.get("status") or "pending"), (call,))
        elif name == "TaskCreate":
            created += 1
            items = items if items is not None else {}
            named = re.search(r"#(\d+)", result_text((results.get(str(block.get("id"))) or {}).get("content")))
            task_id = named.group(1) if named else str(created)
            subject = str(args.get("subject") or "").strip()
            if subject:
                items[task_id] = TodoItem(subject, str(args.get("status") or "pending"), (call,))
        elif name == "TaskUpdate" and items is not None:
            task_id = str(args.get("taskId", ""))
            old = items.get(task_id)
            if old is None:
                continue
            status = str(args.get("status") or old.status)
            if status == "deleted":
                del items[task_id]
                continue
            subject = str(args.get("subject") or old.content).strip()
            items[task_id] = TodoItem(subject, status, (*old.calls, call))
    return None if items is None else list(items.values())


def _normal_status(status: str) -> str:
    return re.sub(r"[_-]", " ", status.strip().lower())


def status_beside(text: str, item: str, status: str) -> bool:
    """Somewhere in ``text`` the item is written with the nearest status word on its line (within
    STATUS_REACH characters, after it first, else before it) being ``status``."""
    words = re.compile(rf"\b(?:{STATUS_WORDS}|{re.escape(status)})\b", re.IGNORECASE)
    wanted = _normal_status(status)
    start = text.find(item)
    while start >= 0:
        end = start + len(item)
        after = text[end : end + STATUS_REACH].split("\n", 1)[0]
        before = text[max(0, start - STATUS_REACH) : start].rsplit("\n", 1)[-1]
        found = words.search(after)
        nearest = found.group(0) if found else None
        if nearest is None:
            earlier = words.findall(before)
            nearest = earlier[-1] if earlier else None
        if nearest is not None and _normal_status(nearest) == wanted:
            return True
        start = text.find(item, start + 1)
    return False


# ----------------------------------------------------------------------------- ground truth: files


def files_modified(history: Sequence[Message]) -> list[str]:
    """Paths write tools were given, in order of first change, each once."""
    paths: dict[str, None] = {}
    open_file: str | None = None  # SWE-agent edits the file it opened last
    for _, block in tool_calls(history):
        name = str(block.get("name", ""))
        raw = block.get("input")
        args: dict[str, Any] = raw if isinstance(raw, dict) else {}
        found: list[str] = []
        if name in WRITE_TOOLS_FILE_PATH:
            found.append(str(args.get("file_path") or args.get("notebook_path") or args.get("path") or ""))
        elif name in EDITOR_TOOLS and args.get("command") in EDITOR_WRITES:
            found.append(str(args.get("path") or ""))
        elif name == "apply_patch":
            for text in _string_leaves(args):
                found.extend(PATCH_FILE_LINE.findall(text))
        elif name == "open":
            open_file = str(args.get("path") or "") or None
        elif name == "create" and args.get("filename"):
            open_file = str(args["filename"])
            found.append(open_file)
        elif name in ("edit", "insert") and not args.get("path") and open_file:
            found.append(open_file)
        for path in found:
            if path.strip():
                paths.setdefault(path.strip(), None)
    return list(paths)


# ----------------------------------------------------------------------------- ground truth: failing runs


@dataclass(frozen=True)
class Run:
    position: int  # the order of its call among all calls
    key: str
    failed: bool
    output: str


def run_key(name: str, args: Any) -> str:
    if isinstance(args, dict) and isinstance(args.get("command"), str):
        return f"{name} {' '.join(args['command'].split())}"
    return f"{name} {canonical_json(args)}"


def run_failed(result: dict[str, Any]) -> bool:
    if result.get("is_error") is True:
        return True
    text = result_text(result.get("content"))
    for pattern in _NONZERO_EXIT:
        if any(int(code) != 0 for code in pattern.findall(text)):
            return True
    if any(pattern.search(text) for pattern in _FAILURE_MARKS):
        return True
    return text.lstrip().lower().startswith("error:")


def runs(history: Sequence[Message]) -> list[Run]:
    """Every tool call that has its result so far, in the order of the calls."""
    results = _results(history)
    found = []
    for position, (_, block) in enumerate(tool_calls(history)):
        result = results.get(str(block.get("id")))
        if result is None:
            continue
        found.append(
            Run(
                position,
                run_key(str(block.get("name", "")), block.get("input", {})),
                run_failed(result),
                result_text(result.get("content")),
            )
        )
    return found


def unresolved_failure(history: Sequence[Message]) -> Run | None:
    """The newest failing run that no later run with the same key fixed."""
    done = runs(history)
    fixed_after: dict[str, int] = {}  # key → position of its newest run that did not fail
    for run in done:
        if not run.failed:
            fixed_after[run.key] = run.position
    for run in reversed(done):
        if run.failed and fixed_after.get(run.key, -1) < run.position:
            return run
    return None


def error_lines(run: Run) -> list[str]:
    lines = [line.strip() for line in run.output.splitlines() if line.strip()]
    matching = [line for line in lines if ERROR_LINE.search(line)]
    picked = matching[-MAX_ERROR_LINES:] or lines[:1]
    return list(dict.fromkeys(picked))


# ----------------------------------------------------------------------------- the probes


@dataclass(frozen=True)
class Facts:
    """What the history up to a compaction says an agent must still know."""

    humans: list[str]
    todos: list[TodoItem] | None
    files: list[str]
    errors: list[str]
    prose: list[str] = field(default_factory=list)


def facts_of(history: Sequence[Message]) -> Facts:
    failure = unresolved_failure(history)
    return Facts(
        humans=[text_of(m) for m in history if is_human(m)],
        todos=todo_list(history),
        files=files_modified(history),
        errors=error_lines(failure) if failure is not None else [],
        prose=last_prose(history),
    )


def _same_message(before: Message, after: Message) -> bool:
    """``after`` carries ``before`` unchanged: the same role and other keys, the same content, or (a
    turn merged with a neighbour) the before-blocks as one contiguous run of the after-blocks."""
    if {k: v for k, v in before.items() if k != "content"} != {k: v for k, v in after.items() if k != "content"}:
        return False
    old, new = before.get("content"), after.get("content")
    if old == new:
        return True
    if not (isinstance(old, list) and isinstance(new, list)) or not old:
        return False
    return any(new[i : i + len(old)] == old for i in range(len(new) - len(old) + 1))


def kept_unchanged(before: Sequence[Message], after: Sequence[Message], n: int = 3) -> Score:
    """Probe 5: each of the last ``n`` messages of ``before`` is in ``after`` unchanged."""
    return _share(any(_same_message(old, new) for new in after) for old in before[-n:])


def _squeezed(text: str) -> str:
    return " ".join(text.split())


def reflowed(facts: Facts, after: ContextView) -> int:
    """Human messages not there verbatim that are there once whitespace is normalised on both
    sides: a rendering that reflows text, told apart from one that loses it (not a pass)."""
    missing = [text for text in facts.humans if text not in after.texts]
    if not missing:
        return 0
    squeezed = _squeezed(after.texts)
    return sum(1 for text in missing if _squeezed(text) in squeezed)


def score(
    facts: Facts,
    before: Sequence[Message] | None,
    after: ContextView,
    *,
    usage: float | None,
    target: float,
    stepped_up: bool = False,
) -> dict[str, Score]:
    """The eight probes for one context after a compaction. ``before``: the context (same format)
    just before the run, None when unknown; ``usage``: used ÷ window after the run, None when unknown;
    ``stepped_up``: STATUS says the run stepped up to handoff (the window can't hold what must stay)."""
    scores = {
        "first_request": _check(facts.humans[0] in after.texts) if facts.humans else NOT_APPLICABLE,
        "human_messages": _share(text in after.texts for text in facts.humans),
        "todo_items": _share(
            set(item.calls) <= after.calls or status_beside(after.everything, item.content, item.status)
            for item in facts.todos or []
        ),
        "files_modified": _share(path in after.everything for path in facts.files),
        "last_three": kept_unchanged(before, after.messages) if before is not None else NOT_APPLICABLE,
        "error_lines": _share(line in after.everything for line in facts.errors),
        "no_overflow": _check(usage <= target + 1e-9 or stepped_up) if usage is not None else NOT_APPLICABLE,
        "last_prose": _share(text in after.texts for text in facts.prose),
    }
    return scores
