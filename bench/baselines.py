"""Two published pruning rules to compare ctxweb's compaction with, and the identifier-retention measure.

Pure Python, no Django. Messages are dicts ``{"role", "content"}`` whose content is a string or a
list of Anthropic content blocks (``text``, ``tool_use {id, name, input}``, ``tool_result
{tool_use_id, content, is_error?}``). Every function returns new dicts and leaves its input alone.

- ``anthropic_clear_tool_uses``: Anthropic's server-side context editing strategy
  ``clear_tool_uses_20250919`` with its defaults (keep the 3 newest tool uses, clear only the
  results — ``clear_tool_inputs`` is false — no excluded tools, no ``clear_at_least``). Its default
  trigger (100,000 input tokens) is taken as reached: the benchmark compares the rules at the moment
  a session needs room.
- ``opencode_prune``: the prune step of OpenCode (sst/opencode, ``session/compaction.ts``): walking
  back from the newest message, the tool outputs after the second-newest user turn are never looked
  at; the newest 40,000 tokens of tool output before it are protected; older outputs are cleared,
  but only when they add up to more than 20,000 tokens.
- ``opencode_compact``: what OpenCode's model sees right after its compaction (sst/opencode,
  ``session/compaction.ts`` ``process``/``select`` and ``message-v2.ts`` ``filterCompacted``): the
  compaction marker (rendered as the user asking "What did we do so far?"), the summary as an
  assistant message, the newest whole user turns that fit its tail budget (a quarter of the usable
  window, clamped to 2,000–15,000 tokens; the oldest kept turn may be cut at an assistant message),
  after the prune above, then the synthetic "Continue if you have next steps…" of an automatic
  compaction. Everything older is gone.
- ``claude_code_compact``: Claude Code's rule as issue 14 states it: after an automatic compaction
  the context is the summary alone, in one user message with the header and closing instruction
  Claude Code writes (as its ``isCompactSummary`` lines show); nothing is kept verbatim. (Claude
  Code also re-attaches the todo list and recently read files; the issue's rule leaves them out.)
- ``retention``: the share of the original's file paths, error lines and decision lines still
  present verbatim afterwards.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from typing import Any

from compaction.tokens import OfflineTokenizer

Message = dict[str, Any]

ANTHROPIC_PLACEHOLDER = "[Tool result cleared to save context]"
OPENCODE_PLACEHOLDER = "[Old tool result content cleared]"
PRUNE_PROTECT = 40_000  # tokens of the newest tool output OpenCode never prunes
PRUNE_MINIMUM = 20_000  # OpenCode prunes only when it would clear more than this
OPENCODE_PROTECTED_TOOLS = frozenset({"skill"})  # outputs OpenCode never prunes
OPENCODE_MARKER = "What did we do so far?"
OPENCODE_CONTINUE = (
    "Continue if you have next steps, or stop and ask for clarification if you are unsure how to proceed."
)
OPENCODE_TAIL_SHARE = 0.25  # of the usable window, for the newest turns kept after a summary
OPENCODE_TAIL_MIN, OPENCODE_TAIL_MAX = 2_000, 15_000
CLAUDE_CODE_SUMMARY_HEAD = (
    "This session is being continued from a previous conversation that ran out of context. "
    "The summary below covers the earlier portion of the conversation.\n\n"
)
CLAUDE_CODE_SUMMARY_TAIL = (
    "\n\nPlease continue the conversation from where we left off without asking the user any further "
    "questions. Continue with the last task that you were asked to work on."
)

PATH_RE = re.compile(r"(?:[\w.-]+/)+[\w.-]+\.\w{1,8}")
ERROR_RE = re.compile(r"error|fail|critical|exception|traceback", re.IGNORECASE)
DECISION_RE = re.compile(r"^## Decision:|^ADR-\d+")

_TOKENIZER = OfflineTokenizer()


@lru_cache(maxsize=65_536)
def _count_text(text: str) -> int:
    """Tokens of a tool output; cached, as a benchmark prunes the same history at every step."""
    return _TOKENIZER.count_text(text)


# ----------------------------------------------------------------------------- helpers


def _blocks(message: Message) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _result_text(content: Any) -> str:
    """The text of a tool_result's content: a string, or the text blocks of a list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _replace_results(messages: Sequence[Message], cleared: dict[tuple[int, int], str]) -> list[Message]:
    """Copies of the messages with the content of the tool_result at (message index, block index)
    replaced by the given text; untouched messages are shallow copies."""
    out = []
    for i, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, list) and any((i, j) in cleared for j in range(len(content))):
            content = [
                {**block, "content": cleared[(i, j)]} if (i, j) in cleared else block for j, block in enumerate(content)
            ]
        out.append({**message, "content": content})
    return out


def is_person_turn(message: Message) -> bool:
    """A user message carrying text a person typed (not only tool results)."""
    if message.get("role") != "user":
        return False
    content = message.get("content")
    if isinstance(content, str):
        return bool(content.strip())
    return any(b.get("type") == "text" and str(b.get("text", "")).strip() for b in _blocks(message))


# ----------------------------------------------------------------------------- Anthropic


def anthropic_clear_tool_uses(messages: Sequence[Message], keep: int = 3) -> list[Message]:
    """Anthropic's ``clear_tool_uses_20250919`` with its defaults: the results of every tool use
    but the ``keep`` newest become a short placeholder; the calls (their inputs) stay."""
    calls: list[str] = [b["id"] for m in messages for b in _blocks(m) if b.get("type") == "tool_use" and "id" in b]
    # A result belongs to the newest earlier call with its id; number the calls in order.
    kept_calls = set(range(max(0, len(calls) - keep), len(calls)))
    latest: dict[str, int] = {}
    n = 0
    cleared: dict[tuple[int, int], str] = {}
    for i, message in enumerate(messages):
        content = message.get("content")
        for j, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use" and "id" in block:
                latest[block["id"]] = n
                n += 1
            elif block.get("type") == "tool_result":
                call = latest.get(block.get("tool_use_id", ""))
                if call is not None and call not in kept_calls:
                    cleared[(i, j)] = ANTHROPIC_PLACEHOLDER
    return _replace_results(messages, cleared)


# ----------------------------------------------------------------------------- OpenCode


def opencode_prune(messages: Sequence[Message]) -> list[Message]:
    """OpenCode's prune rule. Walking back from the newest message: skip until the second-newest
    user turn; from there add up the tokens of each tool output; once the sum passes PRUNE_PROTECT
    every older output is marked; the marked ones are cleared only if they total more than
    PRUNE_MINIMUM. As in OpenCode, failed calls (``is_error``) and the ``skill`` tool's outputs are
    neither counted nor cleared, and an output already cleared ends the walk."""
    names = {b["id"]: str(b.get("name", "")) for m in messages for b in _blocks(m) if b.get("type") == "tool_use"}
    turns, total, pruned = 0, 0, 0
    marked: list[tuple[int, int]] = []
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if is_person_turn(message):
            turns += 1
        if turns < 2:
            continue
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for j in range(len(content) - 1, -1, -1):
            block = content[j]
            if not isinstance(block, dict) or block.get("type") != "tool_result" or block.get("is_error"):
                continue
            if names.get(block.get("tool_use_id", ""), "").lower() in OPENCODE_PROTECTED_TOOLS:
                continue
            text = _result_text(block.get("content"))
            if text == OPENCODE_PLACEHOLDER:  # pruned before: everything older was too
                return _prune(messages, marked, pruned)
            estimate = _count_text(text)
            total += estimate
            if total <= PRUNE_PROTECT:
                continue
            pruned += estimate
            marked.append((i, j))
    return _prune(messages, marked, pruned)


def _prune(messages: Sequence[Message], marked: list[tuple[int, int]], pruned: int) -> list[Message]:
    if pruned <= PRUNE_MINIMUM:
        return _replace_results(messages, {})
    return _replace_results(messages, dict.fromkeys(marked, OPENCODE_PLACEHOLDER))


def opencode_compact(
    messages: Sequence[Message],
    summary: str,
    *,
    usable: int,
    count: Callable[[Message], int] | None = None,
) -> list[Message]:
    """OpenCode's context right after an automatic compaction of ``messages`` into ``summary``:
    marker, summary, the kept tail (pruned), the synthetic continue prompt. ``usable``: the window
    less the output reserve; ``count``: a message's tokens, in the unit of ``usable``."""
    count = count or (lambda m: _TOKENIZER.count_message(m["role"], m["content"]))
    pruned = opencode_prune(messages)
    budget = min(OPENCODE_TAIL_MAX, max(OPENCODE_TAIL_MIN, int(usable * OPENCODE_TAIL_SHARE)))
    start = _opencode_tail_start(pruned, budget, count)
    tail = pruned[start:] if start is not None else []
    return [
        {"role": "user", "content": OPENCODE_MARKER},
        {"role": "assistant", "content": summary},
        *tail,
        {"role": "user", "content": OPENCODE_CONTINUE},
    ]


def _opencode_tail_start(messages: Sequence[Message], budget: int, count: Callable[[Message], int]) -> int | None:
    """OpenCode's ``select``: from the newest user turn back, keep whole turns while they fit the
    budget; the first that does not fit is cut at the earliest assistant message from which the rest
    fits. None when nothing is kept — also when everything fits (then all of it is summarized)."""
    starts = [i for i, m in enumerate(messages) if is_person_turn(m)]
    keep: int | None = None
    total = 0
    for n in range(len(starts) - 1, -1, -1):
        start, end = starts[n], starts[n + 1] if n + 1 < len(starts) else len(messages)
        size = sum(count(m) for m in messages[start:end])
        if total + size <= budget:
            total += size
            keep = start
            continue
        # Inside a turn OpenCode cuts between its messages; a call and its result are one of them.
        for cut in range(start + 1, end):
            if messages[cut].get("role") == "assistant" and sum(count(m) for m in messages[cut:end]) <= budget - total:
                keep = cut
                break
        break
    return keep or None


# ----------------------------------------------------------------------------- Claude Code


def claude_code_compact(summary: str) -> list[Message]:
    """Claude Code's context right after an automatic compaction: the summary alone."""
    return [{"role": "user", "content": CLAUDE_CODE_SUMMARY_HEAD + summary + CLAUDE_CODE_SUMMARY_TAIL}]


# ----------------------------------------------------------------------------- retention


def message_text(message: Message) -> str:
    """What a message says: its text blocks, its tool inputs as JSON and its tool results."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for block in _blocks(message):
        kind = block.get("type")
        if kind == "text":
            parts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            parts.append(json.dumps(block.get("input", {}), ensure_ascii=False))
        elif kind == "tool_result":
            parts.append(_result_text(block.get("content")))
    return "\n".join(parts)


def identifiers(texts: Iterable[str]) -> dict[str, set[str]]:
    """File paths, error lines and decision lines (stripped, non-empty) found in the texts."""
    found: dict[str, set[str]] = {"paths": set(), "errors": set(), "decisions": set()}
    for text in texts:
        found["paths"].update(PATH_RE.findall(text))
        for line in text.splitlines():
            stripped = line.strip()
            if not stripped:
                continue
            if ERROR_RE.search(stripped):
                found["errors"].add(stripped)
            if DECISION_RE.search(stripped):
                found["decisions"].add(stripped)
    return found


def retention(
    original: Sequence[Message], after: Sequence[Message], extra_texts: Iterable[str] = ()
) -> dict[str, float]:
    """Per kind (``paths``, ``errors``, ``decisions``): the share of the original's identifiers
    still present verbatim in the text of ``after`` plus ``extra_texts`` (a checkpoint, say);
    1.0 when the original has none of that kind."""
    texts = [message_text(m) for m in after] + [str(t) for t in extra_texts]
    haystack = "\n".join(texts)
    present = identifiers(texts)  # exact matches first; a substring search only for the rest
    shares = {}
    for kind, wanted in identifiers(message_text(m) for m in original).items():
        if not wanted:
            shares[kind] = 1.0
            continue
        kept = sum(1 for item in wanted if item in present[kind] or item in haystack)
        shares[kind] = kept / len(wanted)
    return shares
