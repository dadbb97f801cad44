"""A session's context over its life: how many tokens a model call would have carried after each
message, with each compaction's drop and each handoff placed where it happened.

Built from stored figures only (nothing is re-tokenized): every message's offline count as it was
appended (a compacted message's original count comes from its oldest backup), scaled by the model's
calibration like STATUS, plus the system prompt and tool definitions. A succeeded compaction takes
its own saving (``tokens_before - tokens_after``, the figures it recorded) off the line after the
last message stored when it finished; a reverted one gave its saving back, so it draws no drop. The
figures are estimates: an exact count replaces only the present value in STATUS, never the past.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from compaction.status import ThresholdFractions
from compaction.tokens import DEFAULT_FRAMING, calibrate
from sessions_app.models import AgentSession, CompactionStatus, HandoffDocument, Message, MessageBackup
from sessions_app.selectors.usage import model_info, session_usage


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
    factor = model_info(session.model).calibration
    current = session_usage(session)
    originals = _original_tokens(session)
    rows = list(
        Message.objects.filter(session=session).order_by("seq").values_list("seq", "role", "tokens", "received_at")
    )
    received = [(at, seq) for seq, _role, _tokens, at in rows]
    pending = _events(session, received)
    base = calibrate(session.system_tokens, factor) + calibrate(session.tool_tokens, factor)
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
    return SessionHistory(
        session_id=session.pk,
        model=session.model,
        context_window=current.context_window,
        reserved_output=current.reserved_output,
        thresholds=current.thresholds.as_dict(),
        base=base,
        points=points,
        events=events,
        context_sent=sent,
    )


def _events(session: AgentSession, received: list[tuple[datetime, int]]) -> list[HistoryEvent]:
    """Succeeded compactions (with their recorded saving in ``before``/``after``) and handoff
    documents, each placed after the newest message stored when it finished, in that order."""
    found: list[HistoryEvent] = []
    compactions = (
        session.compactions.filter(status=CompactionStatus.SUCCEEDED, finished_at__isnull=False)
        .exclude(tokens_before__isnull=True)
        .exclude(tokens_after__isnull=True)
        .order_by("pk")
        .values_list("pk", "level", "trigger", "finished_at", "upto_seq", "tokens_before", "tokens_after")
    )
    for pk, level, trigger, finished, upto, before, after in compactions:
        if finished is None or before is None or after is None:  # the query excludes them; for the type checker
            continue
        found.append(
            HistoryEvent(
                kind="compaction",
                after_seq=max(_seq_at(received, finished), upto or 0),
                at=finished,
                level=level,
                before=before,
                after=after,
                compaction_id=pk,
                trigger=trigger,
            )
        )
    for pk, created in HandoffDocument.objects.filter(session=session).values_list("pk", "created_at"):
        seq = _seq_at(received, created)
        found.append(
            HistoryEvent(kind="handoff", after_seq=seq, at=created, level="handoff", before=0, after=0, handoff_id=pk)
        )
    found.sort(key=lambda event: (event.after_seq, event.at))
    return found


def _original_tokens(session: AgentSession) -> dict[int, int]:
    """Each message's raw count as appended: the oldest backup holds it for a message a compaction
    changed (a later compaction backs up the already-changed content)."""
    originals: dict[int, int] = {}
    rows = (
        MessageBackup.objects.filter(compaction__session=session)
        .order_by("compaction_id", "id")
        .values_list("message__seq", "tokens")
    )
    for seq, tokens in rows:
        originals.setdefault(seq, tokens)
    return originals


def _seq_at(received: list[tuple[datetime, int]], moment: datetime) -> int:
    """The newest seq stored at ``moment`` (0 when none was)."""
    seq = 0
    for at, candidate in received:
        if at > moment:
            break
        seq = candidate
    return seq
