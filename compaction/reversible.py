"""Reversible compaction: deterministic strategies that shrink old content without summarizing it.

Four strategies, each reporting tokens before and after per message:

- ``tool_output``: the content of an older ``tool_result`` becomes a placeholder naming the tool,
  the original size and that a revert restores it, and keeping the file paths and error lines the
  output mentioned (capped). The block itself stays, so every call keeps its result. Long
  arguments of older calls are cleared the same way.
- ``duplicate``: a tool output or text identical (after whitespace normalisation) to an earlier
  one becomes a reference to the earlier seq.
- ``verbose``: long diffs, logs, stack traces and JSON keep their head, their tail and every line
  that matches a preserve pattern.
- ``pasted_output``: output pasted into a user's text (``compaction.pasted``) is cleared as a tool's
  output is; the words around it stay verbatim.

What is never touched: the newest ``policy.protected_count`` messages (the three newest turns at
least), the newest
``keep_recent_turns`` user turns and everything after them, the newest ``protected_tool_tokens``
of tool output, the last message a person typed, and the newest three pieces of prose (text blocks
the user or the assistant wrote, ``compaction.prose``; a call beside one may be condensed). Lines
matching a preserve pattern survive every strategy verbatim.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .identifiers import ERROR_RE, file_paths
from .pasted import pasted_spans, replace_spans
from .policy import NESTED_QUANTIFIER, Policy
from .prose import prose_blocks
from .tokens import Tokenizer
from .types import Msg

MARK = "[ctxweb:"  # every placeholder starts with it, so a second compaction leaves it alone
# Below these sizes a placeholder or reference costs about what it saves.
MIN_PRUNE_TOKENS = 40
MIN_DUPLICATE_TOKENS = 40
# A call's argument shorter than this (a small edit, a short script) stays whole: it says what the
# agent did, in about what a placeholder with its paths and error lines would cost.
MIN_ARGUMENT_TOKENS = 150
# Verbose output: keep this many lines at each end; only bother when at least this many go.
HEAD_LINES = 12
TAIL_LINES = 8
MIN_ELIDED_LINES = 20
LONG_LINE_CHARS = 1_000  # a single line longer than this (minified JSON) is cut in the middle too
MIN_VERBOSE_TOKENS = 400
# A cleared text keeps the file paths it mentioned and its error lines, within these caps (a long
# listing keeps its first paths and says how many more there were).
MAX_PATHS = 50
MAX_PATH_CHARS = 2_500
MAX_ERROR_LINES = 10  # beyond the lines a preserve pattern keeps, which are all kept
ERROR_LINE_CHARS = 200
# Tool arguments that are identifiers (what was run, where): their first line is always kept.
IDENTIFIER_ARGUMENTS = frozenset({"command", "cmd", "file_path", "path", "paths", "pattern", "url", "query", "glob"})


@dataclass(frozen=True)
class Change:
    """The new content of one message, and which strategy saved the most in it."""

    strategy: str
    seq: int
    content: str | list[dict[str, Any]]
    tokens_before: int
    tokens_after: int
    refers_to: tuple[int, ...] = ()  # earlier seqs its duplicate references point the model to

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after


def compile_patterns(patterns: Iterable[str]) -> list[re.Pattern[str]]:
    """Preserve patterns match per line, case-insensitively, so the default ``error|fail|critical``
    (``policy.DEFAULT_PRESERVE_PATTERNS``) also keeps "ERROR" and "Failed"."""
    compiled = []
    for pattern in patterns:
        if NESTED_QUANTIFIER.search(pattern):  # saved before validation refused them: taken literally
            compiled.append(re.compile(re.escape(pattern), re.IGNORECASE))
            continue
        try:
            compiled.append(re.compile(pattern, re.IGNORECASE))
        except (re.error, OverflowError, RecursionError, ValueError):
            compiled.append(re.compile(re.escape(pattern), re.IGNORECASE))
    return compiled


def preserved(lines: Iterable[str], patterns: Sequence[re.Pattern[str]]) -> list[str]:
    return [line for line in lines if any(p.search(line) for p in patterns)]


def result_text(content: Any) -> str:
    """The text of a ``tool_result``'s content (a string or a list of blocks)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                parts.append(part.get("text", "") if part.get("type") == "text" else f"[{part.get('type')}]")
        return "\n".join(parts)
    return ""


def message_text(content: str | list[dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")


def is_human_prompt(msg: Msg) -> bool:
    """A user message a person typed: it has text and is not only tool results."""
    if msg.role != "user":
        return False
    if isinstance(msg.content, str):
        return bool(msg.content.strip())
    return any(b.get("type") == "text" and str(b.get("text", "")).strip() for b in msg.content)


def _fingerprint(text: str) -> str:
    return hashlib.sha1(" ".join(text.split()).encode("utf-8")).hexdigest()


LOG_LINE = re.compile(
    r"^\s*(\[|\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}:\d{2}|(INFO|DEBUG|WARN|WARNING|ERROR|TRACE|FATAL)\b|"
    r"[\w./-]+:\d+|\$ |>>> |PASSED|FAILED|ok\b|=+|-+$|#\d+|\d+[.)|:]\s)",
    re.IGNORECASE,
)


def classify(text: str) -> str | None:
    """What kind of verbose output a text is: diff, trace, json, log — or None for prose and code,
    which are never condensed."""
    stripped = text.lstrip()
    lines = text.splitlines()
    if stripped.startswith(("diff --git", "--- a/", "Index: ")) or any(line.startswith("@@") for line in lines):
        return "diff"
    if "Traceback (most recent call last)" in text or sum(1 for line in lines if line.lstrip().startswith("at ")) > 5:
        return "trace"
    if stripped[:1] and stripped[:1] in "{[" and stripped.rstrip()[-1:] in "}]":
        return "json"
    filled = [line for line in lines if line.strip()]
    # A log: long, and most lines start like log lines do (a time, a level, a path:line, a counter).
    long_enough = len(lines) >= HEAD_LINES + TAIL_LINES + MIN_ELIDED_LINES and filled
    if long_enough and sum(1 for line in filled if LOG_LINE.match(line)) >= 0.6 * len(filled):
        return "log"
    return None


def recall_id(seq: int) -> str:
    """What an agent asks for a message's original by (the MCP ``recall`` tool): ``m<seq>``."""
    return f"m{seq}"


def condense(text: str, patterns: Sequence[re.Pattern[str]], kind: str, seq: int | None = None) -> str | None:
    """Head, tail and every preserved line of a long output; None when that would not shrink it.
    ``seq``: the message's, named in the placeholders as what to recall it by."""
    back = f"recall {recall_id(seq)} or revert restores them" if seq is not None else "revert restores them"
    lines = text.splitlines()
    n = len(lines)
    keep = set(range(min(HEAD_LINES, n))) | set(range(max(0, n - TAIL_LINES), n))
    keep |= {i for i, line in enumerate(lines) if any(p.search(line) for p in patterns)}
    out: list[str] = []
    elided = 0
    for i, line in enumerate(lines):
        if i in keep:
            if elided:
                out.append(f"{MARK} … {elided} lines of {kind} output elided; {back}]")
                elided = 0
            matched = any(p.search(line) for p in patterns)
            if len(line) > LONG_LINE_CHARS and not matched:
                cut = len(line) - 600
                line = f"{line[:400]}{MARK} … {cut} characters elided]{line[-200:]}"
            out.append(line)
        else:
            elided += 1
    if elided:
        out.append(f"{MARK} … {elided} lines of {kind} output elided; {back}]")
    result = "\n".join(out)
    return result if len(result) < len(text) * 0.8 else None


def cleared(what: str, text: str, tokens: int, patterns: Sequence[re.Pattern[str]], seq: int | None = None) -> str:
    """The placeholder for cleared content: what it was, its size, what to recall it by (``seq``: its
    message's) and that a revert restores it, the file paths it mentioned, and its error lines — every
    line a preserve pattern protects, verbatim, and up to ``MAX_ERROR_LINES`` more that report a
    failure. Each kept line appears once."""
    lines = text.splitlines()
    size = f"{tokens:,} tokens" + (f", {len(lines):,} lines" if len(lines) > 1 else "")
    back = f"recall {recall_id(seq)} or revert restores" if seq is not None else "revert restores"
    head = f"{MARK} {what}cleared ({size}); {back}]"
    kept: dict[str, None] = {}  # the lines to keep, each once, in order
    errors = 0
    for line in lines:
        if not line.strip():
            continue
        if any(p.search(line) for p in patterns):
            kept[line] = None
        elif errors < MAX_ERROR_LINES and ERROR_RE.search(line):
            error = _cut(line.strip(), ERROR_LINE_CHARS)
            errors += error not in kept
            kept[error] = None
    said = "\n".join(kept)
    listed = _path_list([p for p in file_paths(text) if p not in said])
    return "\n".join([head, *([listed] if listed else []), *kept])


def _cut(line: str, limit: int) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _path_list(paths: Sequence[str]) -> str:
    """``paths: a/b.py, c/d.ts (+3 more)``, at most ``MAX_PATHS`` paths in ``MAX_PATH_CHARS``."""
    shown: list[str] = []
    chars = 0
    for path in paths[:MAX_PATHS]:
        chars += len(path) + 2
        if chars > MAX_PATH_CHARS:
            break
        shown.append(path)
    if not shown:
        return ""
    more = len(paths) - len(shown)
    return "paths: " + ", ".join(shown) + (f" (+{more:,} more)" if more else "")


def duplicate_reference(seq: int, what: str, *, shrunk_there: bool = False) -> str:
    """A reference to the earlier copy; says so when that copy is cleared too, so the model is not
    pointed at text it can't see."""
    where = f"seq {seq}, which is cleared too" if shrunk_there else f"seq {seq}, verbatim; not repeated here"
    return f"{MARK} same {what} as {where}. Reverting this compaction restores it.]"


class _Planner:
    def __init__(self, messages: Sequence[Msg], policy: Policy, context_window: int, tokenizer: Tokenizer) -> None:
        self.messages = messages
        self.policy = policy
        self.tokenizer = tokenizer
        self.patterns = compile_patterns(policy.preserve_patterns)
        self.protected_seqs = self._protected_messages()
        self.prose = prose_blocks(messages)  # (seq, block index): the newest prose, word for word
        self.protected_blocks = self._protected_tool_blocks(policy.protected_tool_tokens(context_window))
        self.tool_names = {
            b["id"]: b.get("name", "tool")
            for m in messages
            if isinstance(m.content, list)
            for b in m.content
            if b.get("type") == "tool_use" and "id" in b
        }
        self.seen: dict[str, int] = {}  # fingerprint → first seq holding it
        self.seq = 0  # the message being planned
        self.shrunk: set[str] = set()  # fingerprints whose first copy this plan clears or condenses
        self.references: set[int] = set()  # seqs the message being planned refers to

    def _protected_messages(self) -> set[int]:
        """The newest ``keep_recent_messages`` messages, the newest N user turns (user-role messages,
        as the API counts turns) and all after them, and the last message a person typed."""
        turns = [i for i, m in enumerate(self.messages) if m.role in ("user", "tool")]
        keep = self.policy.keep_recent_turns
        start = len(self.messages) if keep <= 0 else (turns[-keep] if len(turns) >= keep else 0)
        untouched = self.policy.protected_count([m.role for m in self.messages])
        start = min(start, max(0, len(self.messages) - untouched))
        protected = {m.seq for m in self.messages[start:]}
        if turns:
            protected.add(self.messages[turns[-1]].seq)  # the last user message stays verbatim
        prompts = [m.seq for m in self.messages if is_human_prompt(m)]
        if prompts:
            protected.add(prompts[-1])
        return protected

    def _protected_tool_blocks(self, budget: int) -> set[tuple[int, int]]:
        """(seq, block index) of the newest tool outputs, up to ``budget`` tokens (OpenCode's rule)."""
        protected: set[tuple[int, int]] = set()
        total = 0
        for m in reversed(self.messages):
            if not isinstance(m.content, list):
                continue
            for i in range(len(m.content) - 1, -1, -1):
                block = m.content[i]
                if block.get("type") != "tool_result":
                    continue
                total += self.tokenizer.count_message("user", [block]) - self.tokenizer.count_message("user", [])
                if total > budget:
                    return protected
                protected.add((m.seq, i))
        return protected

    def plan(self) -> list[Change]:
        changes = []
        for msg in self.messages:
            change = self._message(msg)
            if change is not None:
                changes.append(change)
        return changes

    def _remember(self, text: str, seq: int) -> int | None:
        """The seq of an earlier identical text, or None (and this one is remembered)."""
        if not text.strip() or text.startswith(MARK):
            return None
        key = _fingerprint(text)
        earlier = self.seen.get(key)
        if earlier is None:
            self.seen[key] = seq
        return earlier if earlier != seq else None

    def _message(self, msg: Msg) -> Change | None:
        self.references = set()
        self.seq = msg.seq  # named in this message's placeholders
        touchable = msg.seq not in self.protected_seqs
        saved: dict[str, int] = {}
        if isinstance(msg.content, str):
            earlier = self._remember(msg.content, msg.seq)
            # What a person wrote stays verbatim: the user's words are what an agent goes on from; only
            # the output they pasted may be condensed. The newest prose stays whole (``prose``).
            said = (msg.seq, 0) in self.prose
            if msg.role == "user":
                new = self._pasted(msg.content, saved) if touchable and not said else None
            else:
                new = self._text(msg.content, earlier, saved, touchable and not said, "message")
            content: str | list[dict[str, Any]] = new if new is not None else msg.content
        else:
            blocks = []
            for i, block in enumerate(msg.content):
                blocks.append(self._block(msg, i, block, saved, touchable))
            content = blocks
        if not saved:
            return None
        after = self.tokenizer.count_message(msg.role, content)
        if after >= msg.tokens:
            return None
        strategy = max(saved, key=lambda k: saved[k])
        return Change(strategy, msg.seq, content, msg.tokens, after, tuple(sorted(self.references)))

    def _text(self, text: str, earlier: int | None, saved: dict[str, int], touchable: bool, what: str) -> str | None:
        """A shorter form of a text (a reference or a condensed form), or None to keep it."""
        if not touchable or text.startswith(MARK):
            return None
        tokens = self.tokenizer.count_text(text)
        if earlier is not None and tokens >= MIN_DUPLICATE_TOKENS:
            new = self._reference(earlier, what, text)
            if self._record(saved, "duplicate", tokens, new) is not None:
                return new
        if tokens >= MIN_VERBOSE_TOKENS:
            kind = classify(text)
            if kind is not None:
                condensed = condense(text, self.patterns, kind, self.seq)
                if condensed is not None and self._record(saved, "verbose", tokens, condensed) is not None:
                    self.shrunk.add(_fingerprint(text))
                    return condensed
        return None

    def _pasted(self, text: str, saved: dict[str, int]) -> str | None:
        """A user's text with the output pasted into it cleared as a tool's output is (its paths and
        error lines kept), every other character as it was; None to keep it whole."""

        def shorter(part: str) -> str | None:
            if any(line.lstrip().startswith(MARK) for line in part.splitlines()):
                return None  # condensed by an earlier compaction
            tokens = self.tokenizer.count_text(part)
            if tokens < MIN_VERBOSE_TOKENS:
                return None
            placeholder = cleared("pasted output ", part, tokens, self.patterns, self.seq)
            return self._record(saved, "pasted_output", tokens, placeholder)

        return replace_spans(text, pasted_spans(text), shorter)

    def _reference(self, earlier: int, what: str, text: str) -> str:
        self.references.add(earlier)
        kept = preserved(text.splitlines(), self.patterns)
        reference = duplicate_reference(earlier, what, shrunk_there=_fingerprint(text) in self.shrunk)
        return reference + ("\n" + "\n".join(kept) if kept else "")

    def _record(self, saved: dict[str, int], strategy: str, tokens: int, new: str) -> str | None:
        gain = tokens - self.tokenizer.count_text(new)
        if gain <= 0:
            return None
        saved[strategy] = saved.get(strategy, 0) + gain
        return new

    def _block(self, msg: Msg, index: int, block: dict[str, Any], saved: dict[str, int], touchable: bool) -> Any:
        kind = block.get("type")
        if kind == "tool_result":
            text = result_text(block.get("content"))
            earlier = self._remember(text, msg.seq)
            if not touchable or (msg.seq, index) in self.protected_blocks or text.startswith(MARK):
                return block
            tokens = self.tokenizer.count_text(text)
            if earlier is not None and tokens >= MIN_DUPLICATE_TOKENS:
                new = self._reference(earlier, "tool output", text)
                if self._record(saved, "duplicate", tokens, new) is not None:
                    return {**block, "content": new}
            if tokens >= MIN_PRUNE_TOKENS:
                name = self.tool_names.get(block.get("tool_use_id", ""), "tool")
                new = cleared(f"{name} output ", text, tokens, self.patterns, self.seq)
                if self._record(saved, "tool_output", tokens, new) is not None:
                    self.shrunk.add(_fingerprint(text))
                    return {**block, "content": new}
            return block
        if kind == "text":
            text = str(block.get("text", ""))
            earlier = self._remember(text, msg.seq)
            said = (msg.seq, index) in self.prose
            if msg.role == "user":
                shorter = self._pasted(text, saved) if touchable and not said else None
            else:
                shorter = self._text(text, earlier, saved, touchable and not said, "text")
            return {**block, "text": shorter} if shorter is not None else block
        if kind == "tool_use" and touchable:
            changed = self._tool_input(block.get("input"), saved)
            return {**block, "input": changed} if changed is not None else block
        return block

    def _tool_input(self, value: Any, saved: dict[str, int]) -> dict[str, Any] | None:
        """Long string arguments of an older call (a written file, an edit, a script) are cleared
        like its output; identifiers (a command's first line, a path) stay. The input keeps its keys."""
        if not isinstance(value, dict):
            return None
        out, changed = {}, False
        for key, item in value.items():
            new = None
            if isinstance(item, str) and not item.startswith(MARK):
                first, _, rest = item.partition("\n")
                keep_first = key in IDENTIFIER_ARGUMENTS
                body = rest if keep_first else item
                if body.startswith(MARK):
                    # cleared by an earlier compaction
                    out[key] = item
                    continue
                tokens = self.tokenizer.count_text(body)
                if tokens >= MIN_ARGUMENT_TOKENS:
                    placeholder = cleared("", body, tokens, self.patterns, self.seq)
                    new = self._record(
                        saved, "tool_output", tokens, f"{first}\n{placeholder}" if keep_first else placeholder
                    )
            out[key] = new if new is not None else item
            changed = changed or new is not None
        return out if changed else None


def plan_compact(messages: Sequence[Msg], policy: Policy, *, context_window: int, tokenizer: Tokenizer) -> list[Change]:
    """The reversible changes for a session's context messages (in seq order); writes nothing."""
    return _Planner(messages, policy, context_window, tokenizer).plan()


def apply_changes(messages: Sequence[Msg], changes: Sequence[Change]) -> list[Msg]:
    """The messages as they would be after the changes (for planning a summary on top)."""
    by_seq = {c.seq: c for c in changes}
    return [
        Msg(m.seq, m.role, by_seq[m.seq].content, by_seq[m.seq].tokens_after, m.state, m.created_at, m.flags)
        if m.seq in by_seq
        else m
        for m in messages
    ]
