"""Tokens by tool in a session: for each tool, its calls, what its calls (``tool_use`` blocks) and
results (``tool_result`` blocks) take in the context as the session received them, and what
compaction took back of them (a summarized message's blocks whole, a pruned one's by what it shrank).

Per-block counts are not stored, so they are worked out here with the offline tokenizer, cheaply: a
message's stored count is its blocks' counts plus the message framing (``OfflineTokenizer``), so the
largest tool result of a message is that count less the other blocks', and only the small blocks
are tokenized. Figures are calibrated as STATUS's are."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from compaction.tokens import OfflineTokenizer, calibrate
from sessions_app.engine import offline_tokenizer
from sessions_app.models import AgentSession, CompactionStatus, Message, MessageBackup, MessageState
from sessions_app.selectors.usage import model_info

UNKNOWN_TOOL = "(unknown)"  # a result whose call is not in the session (a server tool's, say)

# Block types ending so are calls and results: server and MCP tools' blocks (``server_tool_use``…) count too.
_CALL_SUFFIX, _RESULT_SUFFIX = "tool_use", "tool_result"


@dataclass
class ToolFigures:
    tool: str
    calls: int = 0
    results: int = 0
    call_tokens: int = 0
    result_tokens: int = 0
    taken_back: int = 0  # of call_tokens + result_tokens, what compaction removed from the context

    @property
    def tokens(self) -> int:
        return self.call_tokens + self.result_tokens

    @property
    def in_context(self) -> int:
        return max(self.tokens - self.taken_back, 0)  # calibrated parts may round apart by a token

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "calls": self.calls,
            "results": self.results,
            "call_tokens": self.call_tokens,
            "result_tokens": self.result_tokens,
            "tokens": self.tokens,
            "taken_back": self.taken_back,
            "in_context": self.in_context,
        }


@dataclass
class SessionTools:
    session_id: int
    model: str
    tools: list[ToolFigures]  # the most tokens first
    total: ToolFigures = field(default_factory=lambda: ToolFigures("total"))


@dataclass
class _Block:
    kind: str  # "call" or "result"
    key: str  # the call's id (a result's: the id of the call it answers)
    name: str  # a call's tool name; "" for a result
    tokens: int  # raw offline count


def session_tools(session: AgentSession) -> SessionTools:
    """The session's tool figures. Three queries: the messages, the oldest backups' counts, and the
    contents of the backups that differ from their message (those a compaction rewrote)."""
    tokenizer = offline_tokenizer()
    rows = list(Message.objects.filter(session=session).values_list("pk", "content", "tokens", "state").order_by("seq"))
    originals = _original_contents(session, {pk: tokens for pk, _, tokens, _ in rows})
    raw: dict[str, ToolFigures] = {}
    names: dict[str, str] = {}  # call id → tool
    results: list[tuple[_Block, int]] = []  # named once every call's name is known
    for pk, content, tokens, state in rows:
        original = originals.get(pk)
        received, received_tokens = original or (content, tokens)
        blocks = tool_blocks(tokenizer, received, received_tokens) if isinstance(received, list) else []
        if not blocks:
            continue
        now = _in_context(tokenizer, state, content, tokens, changed=original is not None)
        for block in blocks:
            if block.kind == "result":
                results.append((block, _taken_back(block, now)))
                continue
            names.setdefault(block.key, block.name)
            figures = raw.setdefault(block.name, ToolFigures(block.name))
            figures.calls += 1
            figures.call_tokens += block.tokens
            figures.taken_back += _taken_back(block, now)
    for block, taken in results:
        name = names.get(block.key, UNKNOWN_TOOL)
        figures = raw.setdefault(name, ToolFigures(name))
        figures.results += 1
        figures.result_tokens += block.tokens
        figures.taken_back += taken
    factor = model_info(session.model).calibration
    tools = sorted((_calibrated(t, factor) for t in raw.values()), key=lambda t: (-t.tokens, t.tool))
    total = ToolFigures(
        "total",
        calls=sum(t.calls for t in tools),
        results=sum(t.results for t in tools),
        call_tokens=sum(t.call_tokens for t in tools),
        result_tokens=sum(t.result_tokens for t in tools),
        taken_back=sum(t.taken_back for t in tools),
    )
    return SessionTools(session_id=session.pk, model=session.model, tools=tools, total=total)


def _calibrated(raw: ToolFigures, factor: float) -> ToolFigures:
    return ToolFigures(
        raw.tool,
        calls=raw.calls,
        results=raw.results,
        call_tokens=calibrate(raw.call_tokens, factor),
        result_tokens=calibrate(raw.result_tokens, factor),
        taken_back=calibrate(raw.taken_back, factor),
    )


# How a message stands in the context now: wholly, or gone (summarized), else by its blocks as they are now.
_WHOLE, _GONE = "whole", "gone"


def _in_context(
    tokenizer: OfflineTokenizer, state: str, content: list[Any], tokens: int, *, changed: bool
) -> str | dict[tuple[str, str], int]:
    """How a message's tool blocks stand in the context now: ``_GONE`` when a compaction summarized
    the message away; by kind and id, as they are now, when one rewrote it (a block it dropped is
    absent); else ``_WHOLE``, as received. An archived session's messages count what compaction
    changed in them, not what it summarized before the archive."""
    if state == MessageState.SUMMARIZED:
        return _GONE
    if not changed:
        return _WHOLE
    return {(b.kind, b.key): b.tokens for b in tool_blocks(tokenizer, content, tokens)}


def _taken_back(block: _Block, now: str | dict[tuple[str, str], int]) -> int:
    if now == _GONE:
        return block.tokens
    if isinstance(now, dict):
        return max(block.tokens - now.get((block.kind, block.key), 0), 0)
    return 0


def _original_contents(session: AgentSession, current: dict[int, int]) -> dict[int, tuple[list[Any], int]]:
    """The content and count each rewritten message was received with: the backup of the oldest
    compaction in force that changed it, where its count differs from the message's now (a summarized
    message keeps its content; a reverted compaction's backups restored theirs already). Once the
    revert window's backups are gone, the content the message has now stands in for it."""
    oldest: dict[int, tuple[int, int]] = {}  # message → (backup, tokens)
    backups = (
        MessageBackup.objects.filter(compaction__session=session, compaction__status=CompactionStatus.SUCCEEDED)
        .order_by("compaction_id")
        .values_list("message_id", "pk", "tokens")
    )
    for message_id, pk, tokens in backups:
        oldest.setdefault(message_id, (pk, tokens))
    wanted = [pk for message_id, (pk, tokens) in oldest.items() if current.get(message_id) != tokens]
    found: dict[int, tuple[list[Any], int]] = {}
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        for message_id, content, tokens in MessageBackup.objects.filter(pk__in=chunk).values_list(
            "message_id", "content", "tokens"
        ):
            if isinstance(content, list):
                found[message_id] = (content, tokens)
    return found


def tool_blocks(tokenizer: OfflineTokenizer, content: Sequence[Any], tokens: int) -> list[_Block]:
    """The tool blocks of a message whose stored count is ``tokens``, each with its raw count. The
    largest result is what the count leaves once the framing and the other blocks are taken off;
    when the count can't be such a sum (counted with other framing), every block is counted."""
    blocks = [b for b in content if isinstance(b, dict)]
    kinds = [_kind(b) for b in blocks]
    tools = [i for i, kind in enumerate(kinds) if kind]
    if not tools:
        return []
    results = [i for i in tools if kinds[i] == "result"]
    derived = _largest(blocks, results)
    # With no result to derive, only the tool blocks need counting.
    counted = tools if derived is None else [i for i in range(len(blocks)) if i != derived]
    counts = {i: tokenizer.count_block(blocks[i]) for i in counted}
    if derived is not None:
        rest = tokens - tokenizer.framing.message - sum(counts.values())
        counts[derived] = rest if rest >= tokenizer.framing.tool_result else tokenizer.count_block(blocks[derived])
    return [_block(blocks[i], kinds[i], counts[i]) for i in tools]


def _largest(blocks: list[dict[str, Any]], among: list[int]) -> int | None:
    if len(among) <= 1:
        return among[0] if among else None
    return max(among, key=lambda i: len(json.dumps(blocks[i], ensure_ascii=False)))


def _kind(block: dict[str, Any]) -> str:
    kind = str(block.get("type", ""))
    if kind.endswith(_CALL_SUFFIX) and "id" in block:
        return "call"
    if kind.endswith(_RESULT_SUFFIX) and "tool_use_id" in block:
        return "result"
    return ""


def _block(block: dict[str, Any], kind: str, tokens: int) -> _Block:
    if kind == "call":
        return _Block("call", str(block["id"]), str(block.get("name") or UNKNOWN_TOOL), tokens)
    return _Block("result", str(block["tool_use_id"]), "", tokens)
