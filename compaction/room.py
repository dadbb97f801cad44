"""Room for a checkpoint: what it carries when it can't carry everything (docs/COMPACTION.md, "Room
is planned").

A checkpoint is measured as the model reads it: the whole ``<context_summary>`` message, the
summarizer's fields and the facts together. Two limits bound it:

- ``room``: what the run's target leaves beside the system prompt, the tools and the protected
  newest messages. The parts that can go (files read, commands run, the current work's middle, the
  summarizer's lists and texts) are cut to it, least useful first.
- ``cap``: the most the checkpoint may take at all, the policy's budget and the window. The parts an
  agent can't go on without are cut only past it, in this order: decisions, files modified (oldest
  first), open errors, the todo list, the user's older messages, the middle of the first request.
  The newest prose is never cut.

Each cut is said in the checkpoint (``cuts``), so the model reading it knows what it is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Any

from .checkpoint import TEXT_FIELDS, render_summary_text
from .context import summary_message
from .facts import FIRST_REQUEST_FLOOR, cut_middle
from .tokens import Tokenizer

# Characters a text keeps of its start and end when nothing else is left to cut.
LAST_FLOOR = 200
# The summarizer's lists, least essential first (the order the offline summarizer trims them in).
SUMMARY_LISTS = ("important_details", "completed", "blockers", "decisions", "files_modified", "in_progress", "pending")
# The facts that can go before the summary does: the session still holds them, in the kept tail or
# behind a revert, and a model re-reads a file sooner than it re-learns what the user asked.
EXTRA_FACTS = (("files_read", "files read"), ("commands", "commands run"))
# The facts an agent goes on from, cut only past the cap, the first of these first.
ESSENTIAL_FACTS = (
    ("decisions", "decisions"),
    ("files_modified", "files modified"),
    ("errors", "open errors"),
    ("todos", "todo items"),
    ("user_messages", "older user messages"),
)


def checkpoint_tokens(checkpoint: dict[str, Any], tokenizer: Tokenizer) -> int:
    """The checkpoint's size in the context: its ``<context_summary>`` message, framing included."""
    return _summary_tokens(render_summary_text(checkpoint), tokenizer)


@lru_cache(maxsize=32)
def _summary_tokens(text: str, tokenizer: Tokenizer) -> int:
    # A plan counts the checkpoint it settled on more than once (fitting it, then planning with it),
    # and ``fit_checkpoint`` counts it again after each cut, most of its lines unchanged: a text
    # message costs its framing and its text, the text counted line by line.
    return tokenizer.count_message("user", "") + tokenizer.count_lines(summary_message(text)["content"])


def fit_checkpoint(
    checkpoint: dict[str, Any], tokenizer: Tokenizer, *, room: int, cap: int, budget: int | None = None
) -> dict[str, Any]:
    """``checkpoint`` cut to ``room`` tokens by its optional parts and to ``cap`` by its essential
    ones (module docstring), with what was cut listed in ``cuts``; the newest prose and the first
    request's last 2,000 characters only past ``budget`` (the policy's, default ``cap``): a window too
    small for them is said in STATUS, never made up for by cutting what the agent said last. A
    checkpoint that cannot be cut further stays over its limit: the caller counts it."""
    out: dict[str, Any] = {k: (list(v) if isinstance(v, list) else v) for k, v in checkpoint.items()}
    facts = out.get("facts")
    facts = {k: (list(v) if isinstance(v, list) else v) for k, v in facts.items()} if isinstance(facts, dict) else {}
    out["facts"] = facts or None
    cuts: dict[str, int] = {}
    cut_texts: list[str] = []
    cap = max(cap, 0)
    room = min(max(room, 0), cap)

    def said() -> None:
        out["cuts"] = [f"{count:,} {label}" for label, count in cuts.items() if count] + cut_texts

    def size() -> int:  # the line saying what was cut counts too
        said()
        return checkpoint_tokens(out, tokenizer)

    current = size()
    for name, label in EXTRA_FACTS:
        current = _drop_oldest(facts, name, 0, current, room, size, cuts, label)
    if current > room and facts.get("current_work"):
        # The newest prose holds the agent's latest words, and the kept tail its newer work.
        facts["current_work"] = ""
        cut_texts.append("the current work")
        current = size()
    current = trim_summary(out, current, room, size, cuts, cut_texts)
    for name, label in ESSENTIAL_FACTS:
        floor = 1 if name == "files_modified" else 0
        current = _drop_oldest(facts, name, floor, current, cap, size, cuts, label)
    current = _cut_first_request(out, facts, current, cap, FIRST_REQUEST_FLOOR, size, cut_texts)
    # Past the budget still (a small one, ``adk``'s 500): the middles of the newest prose carried here,
    # oldest first, then of the first request down to its start and end.
    last = cap if budget is None else max(budget, room)
    facts["recent_prose"] = [dict(p) if isinstance(p, dict) else p for p in facts.get("recent_prose") or []]
    for piece in facts["recent_prose"]:
        text = str(piece.get("text", "")) if isinstance(piece, dict) else ""
        keep = len(text)
        while current > last and keep > LAST_FLOOR:
            keep = max(LAST_FLOOR, min(keep - (current - last) * 4 - 50, keep * 4 // 5))
            piece["text"] = cut_middle(text, keep)
            if "the middle of the newest prose" not in cut_texts:
                cut_texts.append("the middle of the newest prose")
            current = size()
    _cut_first_request(out, facts, current, last, LAST_FLOOR, size, cut_texts)
    said()
    return out


def _cut_first_request(
    out: dict[str, Any],
    facts: dict[str, Any],
    current: int,
    cap: int,
    floor: int,
    size: Callable[[], int],
    cut_texts: list[str],
) -> int:
    """The first request cut in the middle to what the cap leaves it, never below ``floor`` characters."""
    first = str(facts.get("first_request") or "")
    keep = len(first)
    while current > cap and keep > floor:
        # About four characters a token: what is over, and a little for the marker the cut leaves.
        keep = max(floor, min(keep - (current - cap) * 4 - 50, keep * 4 // 5))
        facts["first_request"] = cut_middle(first, keep)
        if "the middle of the first request" not in cut_texts:
            cut_texts.append("the middle of the first request")
        current = size()
    return current


def _drop_oldest(
    items: dict[str, Any],
    name: str,
    floor: int,
    current: int,
    limit: int,
    size: Callable[[], int],
    cuts: dict[str, int],
    label: str,
) -> int:
    """Drop the oldest entries of one list (several at once when far over) down to ``floor``."""
    while current > limit and len(items.get(name) or []) > floor:
        drop = max(1, min(len(items[name]) - floor, (current - limit) // 60))
        del items[name][:drop]
        cuts[label] = cuts.get(label, 0) + drop
        if name == "user_messages":  # the facts say how many of the user's messages they omit
            items["user_messages_cut"] = int(items.get("user_messages_cut") or 0) + drop
        current = size()
    return current


def trim_summary(
    out: dict[str, Any],
    current: int,
    limit: int,
    size: Callable[[], int],
    cuts: dict[str, int],
    cut_texts: list[str],
) -> int:
    """The summarizer's part cut to ``limit``: the longest, least essential lists first, then the ends
    of the texts; what went is counted in ``cuts`` and ``cut_texts``."""
    while current > limit:
        candidates = [f for f in SUMMARY_LISTS if out.get(f)]
        if not candidates:
            break
        longest = max(candidates, key=lambda f: (len(out[f]), -SUMMARY_LISTS.index(f)))
        drop = max(1, min(len(out[longest]) // 2, (current - limit) // 40))
        del out[longest][:drop]
        cuts["items of the summary"] = cuts.get("items of the summary", 0) + drop
        current = size()
    for name in TEXT_FIELDS:
        limit_chars = 1_200
        if current > limit and len(out.get(name) or "") > 40:
            cut_texts.append(f"the end of the summary's {name.replace('_', ' ')}")
        while current > limit and len(out.get(name) or "") > 40:
            text = out[name]
            out[name] = text[: min(limit_chars, len(text) - 1)].rstrip() + "…"
            limit_chars //= 2
            current = size()
    return current
