"""The newest prose: the last things the user or the assistant said, which every compaction keeps verbatim.

A *piece of prose* is a text block of a user or assistant message (a string content is one block) that
is not tool output, not a tool call and not text the agent's harness injected (``compaction.injected``:
a user text block with no words a person typed, a line flagged ``meta``), nor a ctxweb placeholder.
A user's piece is the words they typed in that block; an assistant's is the block's text, outer
whitespace stripped.

In a coding session the newest messages are mostly tool calls and results; the assistant's last
explanation ("the root cause is …, next I'll …") sits further back, and it is what the agent goes on
from. So the newest ``NEWEST_PROSE`` pieces before a compaction stay verbatim in the context after it,
whatever the level, preset or summarizer: the reversible strategies leave their blocks alone (a call in
the same message may still be condensed), and a piece whose message a summary replaces is carried in
the checkpoint's facts word for word (``recent_prose``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

from .injected import typed_part
from .types import Msg

NEWEST_PROSE = 3
MARK = "[ctxweb:"  # a placeholder ctxweb wrote (``reversible.MARK``): no one said it


class Prose(TypedDict):
    """One piece of prose as the checkpoint's facts carry it: where it was said, by whom, the words."""

    seq: int
    block: int
    role: str
    text: str


def _text_blocks(content: str | list[dict[str, Any]]) -> Iterable[tuple[int, str]]:
    if isinstance(content, str):
        yield 0, content
        return
    for index, block in enumerate(content):
        if isinstance(block, dict) and block.get("type") == "text":
            yield index, str(block.get("text", ""))


def prose_of(msg: Msg) -> list[Prose]:
    """The pieces of prose in one message, in order."""
    if msg.role not in ("user", "assistant") or (msg.role == "user" and msg.flags.get("meta")):
        return []
    pieces: list[Prose] = []
    for index, text in _text_blocks(msg.content):
        said = typed_part(text) if msg.role == "user" else text.strip()
        if said and not said.startswith(MARK):
            pieces.append({"seq": msg.seq, "block": index, "role": msg.role, "text": said})
    return pieces


def newest_prose(messages: Sequence[Msg], count: int = NEWEST_PROSE) -> list[Prose]:
    """The newest ``count`` pieces of prose of ``messages`` (seq order), oldest first."""
    found: list[Prose] = []
    for msg in reversed(messages):
        found[:0] = prose_of(msg)
        if len(found) >= count:
            break
    return found[-count:] if count > 0 else []


def prose_blocks(messages: Sequence[Msg], count: int = NEWEST_PROSE) -> set[tuple[int, int]]:
    """(seq, block index) of the newest ``count`` pieces: the blocks no strategy may change."""
    return {(p["seq"], p["block"]) for p in newest_prose(messages, count)}


def fold_prose(earlier: Sequence[Any], messages: Iterable[Msg], count: int = NEWEST_PROSE) -> list[Prose]:
    """The newest ``count`` pieces of ``earlier`` (a previous checkpoint's, older than any of
    ``messages``) and ``messages``, oldest first; a piece folded in twice is kept once."""
    pieces: list[Prose] = [_valid(p) for p in earlier if isinstance(p, dict) and isinstance(p.get("text"), str)]
    for msg in messages:
        for piece in prose_of(msg):
            if not any(p["seq"] == piece["seq"] and p["block"] == piece["block"] for p in pieces):
                pieces.append(piece)
        del pieces[: max(0, len(pieces) - count)]
    return pieces[-count:] if count > 0 else []


def _valid(piece: dict[str, Any]) -> Prose:
    def number(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else -1

    return {
        "seq": number(piece.get("seq")),
        "block": number(piece.get("block")),
        "role": str(piece.get("role") or ""),
        "text": piece["text"],
    }


def quotes(pieces: Sequence[Any], text: str) -> bool:
    """Whether one of ``pieces`` begins with ``text`` (a cut text, ending in "…", included): the
    newest assistant text need not be repeated beside them."""
    start = text.removesuffix("…")
    return any(isinstance(p, dict) and str(p.get("text", "")).startswith(start) for p in pieces)


def render_prose(pieces: Sequence[Prose], *, label: str, quoted: Iterable[str] = ()) -> list[str]:
    """Lines quoting ``pieces`` word for word, each after its speaker's tag on a line of its own. A
    user's piece among ``quoted`` (the user's messages the same text quotes whole) is not repeated."""
    pieces = [p for p in pieces if isinstance(p, dict)]
    if not pieces:
        return []
    above = {text.strip() for text in quoted if isinstance(text, str)}
    lines = [f"{label} (verbatim, oldest first):"]
    for piece in pieces:
        role, said = piece.get("role") or "said", str(piece.get("text", ""))
        lines += [f"[{role}] (quoted above)"] if role == "user" and said in above else [f"[{role}]", said]
    return lines
