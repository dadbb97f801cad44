"""Reads that shape what the browser pages show. Numbers come from the same selectors as the API."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from django.db.models import Q
from django.utils.dateparse import parse_datetime

from compaction.checkpoint import checkpoint_decisions
from compaction.reversible import MARK, result_text
from compaction.status import Status
from compaction.tokens import calibrate
from sessions_app.models import (
    ACTIVE_COMPACTION_STATUSES,
    ROLE_RANK,
    AgentSession,
    Checkpoint,
    HandoffDocument,
    Message,
    Project,
    Role,
)
from sessions_app.selectors import access, dashboard, usage
from sessions_app.selectors.compactions import newest_revertible_id, revert_refusal, strategy_totals
from sessions_app.selectors.history import session_history
from sessions_app.selectors.spend import session_spend
from sessions_app.selectors.sub_agents import sub_agents_of
from sessions_app.selectors.tools import session_tools
from sessions_app.web.charts import session_chart
from sessions_app.web.dashboard_chart import daily_chart
from sessions_app.web.spend_panel import spend_tables

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL
    from django.db.models import QuerySet

LIST_DEFERRED = ("tools", "system_prompt", "metadata")  # what a list of sessions never shows
LONG_TEXT = 600  # characters; longer content starts collapsed
# However large a message, the session page (and its live reloads) shows a bounded excerpt of it:
# at most this many characters of each block, and this many blocks; the rest is on the message's page.
EXCERPT_CHARS = 3000
EXCERPT_BLOCKS = 20
TITLE_CHARS = 200
PAGE_CHARS = 100_000  # characters of one message per page of its own view
# The usage bar: the parts of STATUS it stacks, and the thresholds it marks (the keys of
# ``compaction.status.ThresholdFractions``, in their order).
Segment = Literal["system_prompt", "tool_definitions", "messages", "summary", "reserved_output", "free"]
SEGMENTS: tuple[tuple[Segment, str], ...] = (
    ("system_prompt", "System prompt"),
    ("tool_definitions", "Tool definitions"),
    ("messages", "Messages"),
    ("summary", "Summary"),
    ("reserved_output", "Reserved output"),
    ("free", "Free space"),
)
MARKS: tuple[Literal["remind", "compact", "summarize", "handoff"], ...] = ("remind", "compact", "summarize", "handoff")


def can_write(user: User, project_id: int) -> bool:
    role = access.role_in(user, project_id)
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[Role.MEMBER]


def is_admin(user: User, project_id: int) -> bool:
    return access.role_in(user, project_id) == Role.ADMIN


# ----------------------------------------------------------------------------- sessions list


def sessions_at_level(sessions: QuerySet[AgentSession], *, level: str) -> QuerySet[AgentSession]:
    """The list's sessions at ``level``, by the stored level (SQL, paged like any list), and those
    without one yet whose totals put them there."""
    found = [s.pk for s, current in usage.unleveled(sessions) if current.level.value == level]
    return sessions.filter(Q(level=level) | Q(pk__in=found)) if found else sessions.filter(level=level)


def session_rows(sessions: Iterable[AgentSession]) -> list[dict[str, Any]]:
    """One row per session with its usage, from its cached totals (no message is read)."""
    rows = []
    for session in sessions:
        current = usage.session_usage(session)
        rows.append(
            {
                "session": session,
                "usage_percent": current.usage_percent,
                "level": current.level.value,
                "used": current.used,
                "context_window": current.context_window,
                "width": min(100.0, current.usage_percent),
            }
        )
    return rows


def dashboard_panel(project: Project, user: User) -> dict[str, Any]:
    """The dashboard above a project's sessions (``selectors.dashboard``) with its chart's geometry."""
    board = dashboard.project_dashboard(project=project)
    return {
        "dashboard": board,
        "daily": daily_chart(board.days),
        "compaction_levels": list(board.compactions),
        # Outcomes down, levels across: the narrow card holds three level columns, not four outcome ones.
        "compaction_rows": [
            (o, [(level, board.compactions[level][o]) for level in board.compactions]) for o in dashboard.OUTCOMES
        ],
        "can_write": can_write(user, project.pk),
        "spend": spend_tables(project, days=len(board.days)),
        "spend_days": len(board.days),
    }


# ----------------------------------------------------------------------------- session page


def breakdown(status: Status) -> dict[str, Any]:
    """Seed 001's breakdown as segments of one stacked bar, with the thresholds to mark on it."""
    window = status["context_window"] or 1
    segments = []
    for key, label in SEGMENTS:
        tokens = status[key]
        segments.append(
            {
                "key": key,
                "label": label,
                "tokens": tokens,
                "percent": round(tokens / window * 100, 1),
                "width": max(0.0, min(100.0, tokens / window * 100)),
            }
        )
    fractions, whole = status["thresholds"], status["threshold_tokens"]
    marks = [{"name": name, "percent": round(fractions[name] * 100, 1), "tokens": whole[name]} for name in MARKS]
    return {"segments": segments, "marks": marks}


def compaction_rows(session: AgentSession, *, busy: bool) -> list[dict[str, Any]]:
    rows = []
    newest = newest_revertible_id(session.pk)
    for record in session.compactions.order_by("-id")[:50]:
        refusal = revert_refusal(record, newest_id=newest, busy=busy)
        rows.append(
            {
                "record": record,
                "active": record.status in ACTIVE_COMPACTION_STATUSES,
                "revertible": refusal is None,
                "why_not": refusal.detail if refusal is not None and record.status == "succeeded" else "",
                "strategies": strategy_totals(record.items or []),
            }
        )
    return rows


def live_version(session: AgentSession) -> str:
    """Changes whenever anything the session page shows changes: a message, a compaction's state."""
    latest = session.compactions.order_by("-id").values_list("id", "status").first()
    handoffs = session.handoffs.count()
    parts = (
        session.last_seq,
        session.status,
        session.summary_tokens,
        session.message_tokens,
        session.exact_tokens,
        session.exact_upto_seq,
        session.exact_cached,
        session.count_warning,
        session.auto_paused,
        latest,
        handoffs,
    )
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:16]


def live_panel(session: AgentSession, user: User, *, version: str | None = None) -> dict[str, Any]:
    """What the live part of the session page shows (polled every 2 s): usage and compactions."""
    status = usage.session_status(session)
    busy = session.compactions.filter(status__in=ACTIVE_COMPACTION_STATUSES).exists()
    history = session_history(session)
    return {
        "session": session,
        "status": status,
        "counted_at": parse_datetime(status["counted_at"]),
        "error_percent": round(status["expected_error"] * 100, 1),
        "bar": breakdown(status),
        "history": history,
        "chart": session_chart(history),
        "compactions": compaction_rows(session, busy=busy),
        "running": busy,
        "can_write": can_write(user, session.project_id) and session.status == "active",
        "version": version or live_version(session),
    }


SUB_AGENTS_SHOWN = 100


def sub_agent_panel(session: AgentSession) -> dict[str, Any]:
    """The session's sub-agents' sessions and its spend with and without theirs; and the session that
    started this one, when it is a sub-agent's."""
    started = list(sub_agents_of(session)[: SUB_AGENTS_SHOWN + 1])
    spawner = (
        AgentSession.objects.filter(pk=session.spawned_by_id).only("pk", "name", "external_id").first()
        if session.spawned_by_id
        else None
    )
    return {
        "sub_agents": started[:SUB_AGENTS_SHOWN],
        "sub_agents_more": len(started) > SUB_AGENTS_SHOWN,
        "spawned_by": spawner,
        "spend_alone": session_spend(session) if started else None,
        "spend_with_sub_agents": session_spend(session, with_sub_agents=True) if started else None,
    }


def session_page(session: AgentSession, user: User) -> dict[str, Any]:
    return {
        **live_panel(session, user),
        **sub_agent_panel(session),
        "checkpoints": [(c, checkpoint_sections(c)) for c in session.checkpoints.order_by("-version")[:20]],
        "handoffs": list(HandoffDocument.objects.filter(session=session).select_related("continuation")[:20]),
        "continuations": list(session.continuations.all()),
        "tools": session_tools(session),
    }


# ----------------------------------------------------------------------------- timeline


@dataclass
class Block:
    kind: str
    title: str
    body: str
    long: bool = False
    compacted: bool = False
    error: bool = False
    offset: int = 0  # characters of this block before ``body`` (not shown here)
    hidden: int = 0  # characters of this block after ``body`` (not shown here)


@dataclass
class Entry:
    message: Message
    tokens: int
    blocks: list[Block] = field(default_factory=list)
    hidden_blocks: int = 0

    @property
    def compacted(self) -> bool:
        return any(b.compacted for b in self.blocks)


def blocks_of(content: Any) -> list[Block]:
    """Content blocks as readable pieces; the template escapes every string."""
    if isinstance(content, str):
        return [_block("text", "", content)]
    out = []
    for b in content or []:
        kind = b.get("type")
        if kind == "text":
            out.append(_block("text", "", str(b.get("text", ""))))
        elif kind == "tool_use":
            args = json.dumps(b.get("input", {}), ensure_ascii=False, indent=1)
            out.append(_block("tool_use", f"→ {b.get('name')} ({b.get('id')})", args))
        elif kind == "tool_result":
            title = f"← result of {b.get('tool_use_id')}" + (" (error)" if b.get("is_error") else "")
            block = _block("tool_result", title, result_text(b.get("content")))
            block.error = bool(b.get("is_error"))
            out.append(block)
        elif kind in ("thinking", "redacted_thinking"):
            out.append(_block("thinking", "thinking", str(b.get("thinking", ""))))
        elif kind == "compaction":
            out.append(_block("compaction", "compaction by the provider", str(b.get("content") or "(no summary)")))
        else:
            out.append(_block(str(kind), str(kind), json.dumps(b, ensure_ascii=False)[:2000]))
    return out


def _block(kind: str, title: str, body: str) -> Block:
    return Block(kind, title[:TITLE_CHARS], body, long=len(body) > LONG_TEXT, compacted=MARK in body)


def excerpt(blocks: list[Block]) -> tuple[list[Block], int]:
    """The first blocks, each cut to EXCERPT_CHARS, and how many blocks were left out."""
    shown = [_cut(b, EXCERPT_CHARS) for b in blocks[:EXCERPT_BLOCKS]]
    return shown, len(blocks) - len(shown)


def _cut(block: Block, chars: int) -> Block:
    if len(block.body) <= chars:
        return block
    return replace(block, body=block.body[:chars], hidden=len(block.body) - chars)


def timeline(session: AgentSession, *, limit: int = 200) -> list[Entry]:
    factor = usage.model_info(session.model).calibration
    rows = list(Message.objects.filter(session=session).order_by("-seq")[:limit])
    return [Entry(m, calibrate(m.tokens, factor), *excerpt(blocks_of(m.content))) for m in reversed(rows)]


class MessageText:
    """A message's blocks as one run of characters, so that Django's Paginator pages through it: a
    slice is the blocks, or the parts of blocks, that fall within it. An empty block takes one place,
    so its title still shows."""

    def __init__(self, blocks: list[Block]) -> None:
        self.blocks = blocks

    def __len__(self) -> int:
        return sum(max(len(b.body), 1) for b in self.blocks)

    def __getitem__(self, window: slice) -> list[Block]:
        start, stop = window.start or 0, window.stop
        out, position = [], 0
        for block in self.blocks:
            end = position + max(len(block.body), 1)
            if position < stop and end > start:
                lo, hi = max(start - position, 0), min(stop - position, len(block.body))
                out.append(replace(block, body=block.body[lo:hi], offset=lo, hidden=max(len(block.body) - hi, 0)))
            position = end
        return out


def message_original(message: Message) -> list[Block] | None:
    """What a compacted message said before its current compaction (kept until the revert window
    passes), or None when no backup is left."""
    if message.compaction_id is None:  # never compacted: nothing was backed up
        return None
    backup = message.backups.filter(compaction_id=message.compaction_id).order_by("-id").first()
    return blocks_of(backup.content) if backup is not None else None


def checkpoint_sections(checkpoint: Checkpoint) -> list[tuple[str, list[str]]]:
    data = checkpoint.data or {}
    decisions = [d["decision"] + (f" — {d['rationale']}" if d["rationale"] else "") for d in checkpoint_decisions(data)]
    files = [f.get("path", "") + (f": {f['what']}" if f.get("what") else "") for f in data.get("files_modified", [])]
    facts: dict[str, Any] = data["facts"] if isinstance(data.get("facts"), dict) else {}
    cut = int(facts.get("user_messages_cut") or 0)
    said = [facts.get("first_request") or "", *(facts.get("user_messages") or [])]
    errors = [f"{e.get('run', '')}: " + " / ".join(e.get("lines") or []) for e in facts.get("errors") or []]
    sections = [
        ("Objective", [data.get("objective", "")]),
        ("Summary", [data.get("narrative", "")]),
        ("User messages, verbatim" + (f" ({cut} older omitted)" if cut else ""), said),
        ("Todo list", [f"[{t.get('status', '')}] {t.get('content', '')}" for t in facts.get("todos") or []]),
        ("Completed", data.get("completed", [])),
        ("In progress", data.get("in_progress", [])),
        ("Next steps", data.get("pending", [])),
        ("Blockers", data.get("blockers", [])),
        ("Decisions", decisions),
        ("Files modified", files + [f.get("path", "") for f in facts.get("files_modified") or []]),
        ("Unresolved errors", errors),
        ("Current work", [facts.get("current_work") or ""]),
        ("Details kept verbatim", data.get("important_details", [])),
        ("Last user request", [data.get("last_user_request", "")]),
    ]
    return [(title, [i for i in items if i]) for title, items in sections if any(items)]
