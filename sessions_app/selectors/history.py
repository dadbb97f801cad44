"""A session's context over its life: how many tokens a model call would have carried after each
message, with each compaction's drop and each handoff placed where it happened.

Built from stored figures only (nothing is re-tokenized): every message's offline count as it was
appended (a compacted message's original count comes from the oldest compaction that changed it),
scaled by the model's calibration like STATUS, plus the system prompt and tool definitions. A
succeeded compaction takes its own saving (``tokens_before - tokens_after``, the figures it recorded)
off the line after the last message stored when it finished (one read from a transcript: where the
transcript put it); a reverted one gave its saving back, so it draws no drop. The figures are
estimates: an exact count replaces only the present value in STATUS, never the past.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from compaction.status import ThresholdFractions
from compaction.tokens import DEFAULT_FRAMING, calibrate
from sessions_app.models import AgentSession, Compaction, CompactionStatus, HandoffDocument, Message, MessageBackup
from sessions_app.selectors.usage import harness_tokens, model_info, session_usage


@dataclass(frozen=True)
class HistoryPoint:
    seq: int
    role: str
    at: datetime
    used: int  # calibrated tokens a request would carry right after this message


@dataclass(frozen=True)
class HistoryEvent:
    kind: str  # "compaction" or "handoff"
    after_seq: int  # placed right after this message (0: before the first one)
    at: datetime
    level: str
    before: int  # the line's value just before the event
    after: int  # and just after it (equal for a handoff: a document changes no message)
    compaction_id: int | None = None
    handoff_id: int | None = None
    trigger: str = ""


@dataclass(frozen=True)
class SessionHistory:
    session_id: int
    model: str
    context_window: int
    reserved_output: int
    thresholds: ThresholdFractions  # fractions of the window, as in STATUS
    base: int  # the system prompt and the tools
    now: int  # where the line ends: after the last message and any compaction that followed it
    points: list[HistoryPoint]
    events: list[HistoryEvent]
    # Input tokens this session's model calls carried: each assistant message answered a request
    # holding everything before it (the line's value just before that message).
    context_sent: int

    def threshold_tokens(self) -> dict[str, int]:
        fractions = self.thresholds
        return {
            "remind": round(fractions["remind"] * self.context_window),
            "compact": round(fractions["compact"] * self.context_window),
            "summarize": round(fractions["summarize"] * self.context_window),
            "handoff": round(fractions["handoff"] * self.context_window),
        }


def session_history(session: AgentSession) -> SessionHistory:
    return _history(session, _stored([session.pk])[session.pk])


@dataclass
class _Stored:
    """What a history is built from, read in bulk: messages, backups, compactions, handoffs."""

    messages: list[tuple[int, str, int, datetime]] = field(default_factory=list)  # seq, role, tokens, received
    backups: dict[int, dict[int, int]] = field(default_factory=dict)  # compaction -> seq -> raw tokens
    # pk, level, trigger, status, finished_at, upto_seq, tokens_before, tokens_after, items
    compactions: list[tuple[Any, ...]] = field(default_factory=list)
    handoffs: list[tuple[int, datetime]] = field(default_factory=list)


def _stored(session_ids: list[int]) -> dict[int, _Stored]:
    found = {pk: _Stored() for pk in session_ids}
    messages = Message.objects.filter(session_id__in=session_ids).order_by("session_id", "seq")
    seq_of: dict[int, int] = {}
    for pk, sid, seq, role, tokens, at in messages.values_list(
        "pk", "session_id", "seq", "role", "tokens", "received_at"
    ):
        found[sid].messages.append((seq, role, tokens, at))
        seq_of[pk] = seq
    # The backups' seqs from the messages just read: joining the messages again made PostgreSQL scan
    # every message of every session (a hash join) at a million messages.
    backups = MessageBackup.objects.filter(compaction__session_id__in=session_ids)
    for sid, cid, message_id, tokens in backups.values_list(
        "compaction__session_id", "compaction_id", "message_id", "tokens"
    ):
        found[sid].backups.setdefault(cid, {})[seq_of[message_id]] = tokens
    compactions = Compaction.objects.filter(
        session_id__in=session_ids, status__in=[CompactionStatus.SUCCEEDED, CompactionStatus.REVERTED]
    ).order_by("pk")
    fields = ("level", "trigger", "status", "finished_at", "upto_seq", "tokens_before", "tokens_after", "items")
    for sid, pk, *rest in compactions.values_list("session_id", "pk", *fields):
        found[sid].compactions.append((pk, *rest))
    handoffs = HandoffDocument.objects.filter(session_id__in=session_ids).order_by("pk")
    for sid, pk, created in handoffs.values_list("session_id", "pk", "created_at"):
        found[sid].handoffs.append((pk, created))
    return found


def _history(session: AgentSession, stored: _Stored) -> SessionHistory:
    factor = model_info(session.model).calibration
    current = session_usage(session)
    originals = _original_tokens(stored, factor)
    rows = stored.messages
    received = [(at, seq) for seq, _role, _tokens, at in rows]
    pending = _events(stored, received)
    base = calibrate(session.system_tokens, factor) + calibrate(session.tool_tokens, factor)
    base += harness_tokens(session, factor)  # a transcript's agent's prompt and tools, as STATUS has them
    raw, drop, sent = 0, 0, 0
    points: list[HistoryPoint] = []
    events: list[HistoryEvent] = []

    def line() -> int:
        return base + calibrate(raw + DEFAULT_FRAMING.request, factor) - drop

    def place(upto: int) -> None:
        nonlocal drop
        while pending and pending[0].after_seq <= upto:
            event = pending.pop(0)
            before = line()
            drop += event.before - event.after
            events.append(
                HistoryEvent(
                    **{**event.__dict__, "before": before, "after": line() if event.kind == "compaction" else before}
                )
            )

    place(0)
    for seq, role, tokens, at in rows:
        place(seq - 1)
        if role == "assistant":
            sent += line()
        raw += originals.get(seq, tokens)
        points.append(HistoryPoint(seq=seq, role=role, at=at, used=max(line(), 0)))
    place(rows[-1][0] if rows else 0)
    now = max(line(), 0) if rows else 0
    return SessionHistory(
        session_id=session.pk,
        model=session.model,
        context_window=current.context_window,
        reserved_output=current.reserved_output,
        thresholds=current.thresholds.as_dict(),
        base=base,
        now=now,
        points=points,
        events=events,
        context_sent=sent,
    )


def _events(stored: _Stored, received: list[tuple[datetime, int]]) -> list[HistoryEvent]:
    """Succeeded compactions (with their recorded saving in ``before``/``after``) and handoff
    documents, each placed after the newest message stored when it finished, in that order."""
    found: list[HistoryEvent] = []
    for pk, level, trigger, status, finished, upto, before, after, _items in stored.compactions:
        if status != CompactionStatus.SUCCEEDED or finished is None or before is None or after is None:
            continue
        # A compaction the agent recorded in its transcript (or the provider made) happened where it
        # says, however late ctxweb read it (an import reads it after every message); ctxweb's own,
        # when it finished.
        placed = upto or 0 if trigger in ("transcript", "provider") else max(_seq_at(received, finished), upto or 0)
        found.append(
            HistoryEvent(
                kind="compaction",
                after_seq=placed,
                at=finished,
                level=level,
                before=before,
                after=after,
                compaction_id=pk,
                trigger=trigger,
            )
        )
    for pk, created in stored.handoffs:
        seq = _seq_at(received, created)
        found.append(
            HistoryEvent(kind="handoff", after_seq=seq, at=created, level="handoff", before=0, after=0, handoff_id=pk)
        )
    found.sort(key=lambda event: (event.after_seq, event.at))
    return found


def _original_tokens(stored: _Stored, factor: float) -> dict[int, int]:
    """Each changed message's raw count as appended, from the oldest compaction that changed it: its
    backup while the revert window keeps one (a later compaction backs up already-changed content),
    else that compaction's recorded item (calibrated when recorded, so divided back by the factor)."""
    originals: dict[int, int] = {}
    for compaction_id, *_rest, items in stored.compactions:
        recorded: dict[int, int] = {}
        for item in items if isinstance(items, list) else []:
            seq, before = item.get("seq"), item.get("tokens_before")
            if isinstance(seq, int) and isinstance(before, int):
                # Several strategies may touch one message; the first saw it whole, with the most tokens.
                recorded[seq] = max(recorded.get(seq, 0), before)
        kept = stored.backups.get(compaction_id, {})
        for seq in kept.keys() | recorded.keys():
            if seq not in originals:
                originals[seq] = kept[seq] if seq in kept else round(recorded[seq] / (factor or 1))
    return originals


def _seq_at(received: list[tuple[datetime, int]], moment: datetime) -> int:
    """The newest seq stored at ``moment`` (0 when none was)."""
    seq = 0
    for at, candidate in received:
        if at > moment:
            break
        seq = candidate
    return seq


def history_payload(history: SessionHistory) -> dict[str, object]:
    """The history as JSON (the API's answer and ``ctx status --history --json``)."""
    return {
        "session": history.session_id,
        "model": history.model,
        "context_window": history.context_window,
        "reserved_output": history.reserved_output,
        "thresholds": dict(history.thresholds),
        "threshold_tokens": history.threshold_tokens(),
        "base": history.base,
        "now": history.now,
        "context_sent": history.context_sent,
        "points": [{"seq": p.seq, "role": p.role, "at": p.at.isoformat(), "used": p.used} for p in history.points],
        "events": [
            {
                "kind": e.kind,
                "after_seq": e.after_seq,
                "at": e.at.isoformat(),
                "level": e.level,
                "before": e.before,
                "after": e.after,
                "compaction": e.compaction_id,
                "handoff": e.handoff_id,
                "trigger": e.trigger,
            }
            for e in history.events
        ],
    }
