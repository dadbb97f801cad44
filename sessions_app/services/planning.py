"""Planning a compaction: a snapshot of the session's context, the engine's reversible changes and,
when the level calls for it, a summary of the older turns. Reads only; writes nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from compaction.errors import EngineError
from compaction.policy import Policy
from compaction.reversible import Change, plan_compact
from compaction.summarize import Summarizer, SummaryPlan, plan_summarize
from compaction.tokens import DEFAULT_FRAMING, calibrate
from compaction.types import Level, Msg
from sessions_app.engine import offline_summarizer, offline_tokenizer, summarizer_for
from sessions_app.errors import InvalidInput
from sessions_app.models import CONTEXT_STATES, AgentSession, Checkpoint, Message
from sessions_app.selectors import model_context, usage
from sessions_app.selectors.compactions import strategy_totals

# ----------------------------------------------------------------------------- snapshot


@dataclass
class Snapshot:
    """What the engine sees: the session's context messages up to a fixed seq, and its sizes."""

    session: AgentSession
    policy: Policy
    upto_seq: int
    messages: list[Msg]
    factor: float
    window: int  # calibrated, as in STATUS
    fixed_tokens: int  # raw: system prompt + tools + request framing
    previous_checkpoint: Checkpoint | None
    rows: dict[int, tuple[str, Any, int, str]] = field(default_factory=dict)  # seq → (role, content, tokens, state)

    @property
    def raw_window(self) -> int:
        """The window in raw offline tokens, the unit the engine counts in."""
        return max(1, int(self.window / self.factor))

    def used(self, message_tokens: int, summary_tokens: int) -> int:
        """Calibrated ``used`` of STATUS for the given raw message and summary totals."""
        return calibrate(self.fixed_tokens + message_tokens + summary_tokens, self.factor)

    def fraction(self, message_tokens: int, summary_tokens: int) -> float:
        return self.used(message_tokens, summary_tokens) / self.window if self.window else 1.0


def snapshot(session: AgentSession) -> Snapshot:
    info = usage.model_info(session.model)
    policy = usage.policy_for(session)
    rows = list(
        Message.objects.filter(session=session, state__in=CONTEXT_STATES, seq__lte=session.last_seq)
        .order_by("seq")
        .values_list("seq", "role", "content", "tokens", "state", "created_at")
    )
    messages = [
        Msg(seq=seq, role=role, content=content, tokens=tokens, state=state, created_at=created.isoformat())
        for seq, role, content, tokens, state, created in rows
    ]
    return Snapshot(
        session=session,
        policy=policy,
        upto_seq=session.last_seq,
        messages=messages,
        factor=info.calibration,
        window=session.context_window_override or info.context_window,
        fixed_tokens=session.system_tokens + session.tool_tokens + DEFAULT_FRAMING.request,
        previous_checkpoint=model_context.current_checkpoint(session),
        rows={seq: (role, content, tokens, state) for seq, role, content, tokens, state, _ in rows},
    )


# ----------------------------------------------------------------------------- planning


# Engine refusals that mean "summarizing can't help here", not "something broke".
NO_SUMMARY_POSSIBLE = frozenset({"nothing_to_summarize", "summary_too_large"})


@dataclass
class Outcome:
    """What one run would do: reversible changes, then possibly a summary."""

    level: str
    changes: list[Change]
    summary: SummaryPlan | None
    tokens_before: int  # calibrated
    tokens_after: int
    summarizer: str = ""
    notes: list[str] = field(default_factory=list)
    summary_rows: list[tuple[int, int]] = field(default_factory=list)  # (seq, raw tokens) of summarized messages

    @property
    def saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def items(self, factor: float) -> list[dict[str, Any]]:
        out = [
            {
                "strategy": c.strategy,
                "seq": c.seq,
                "tokens_before": calibrate(c.tokens_before, factor),
                "tokens_after": calibrate(c.tokens_after, factor),
            }
            for c in self.changes
        ]
        if self.summary is not None:
            out.extend(
                {"strategy": "summarize", "seq": seq, "tokens_before": calibrate(tokens, factor), "tokens_after": 0}
                for seq, tokens in self.summary_rows
            )
            out.append(
                {
                    "strategy": "checkpoint",
                    "seq": None,
                    "tokens_before": 0,
                    "tokens_after": calibrate(self.summary.summary_tokens, factor),
                }
            )
        return out


def plan(
    snap: Snapshot, level: str, *, summarizer: Summarizer | None = None, instructions: str = "", force: bool = False
) -> Outcome:
    """Reversible compaction first; then, for ``summarize``, a checkpoint of the older turns when the
    session is still above the summarize threshold (always, when ``force``: a manual request)."""
    policy, tokenizer = snap.policy, offline_tokenizer()
    message_tokens = sum(m.tokens for m in snap.messages)
    summary_tokens = snap.session.summary_tokens
    before = snap.used(message_tokens, summary_tokens)
    changes = plan_compact(snap.messages, policy, context_window=snap.raw_window, tokenizer=tokenizer)
    after_compact = message_tokens - sum(c.tokens_before - c.tokens_after for c in changes)
    outcome = Outcome(level, changes, None, before, snap.used(after_compact, summary_tokens))
    if level == Level.COMPACT.value:
        return outcome
    if not force and snap.fraction(after_compact, summary_tokens) < policy.summarize:
        outcome.notes.append("Reversible compaction brought the session below the summarize threshold.")
        return outcome
    changed = {c.seq: c for c in changes}
    view = [
        Msg(m.seq, m.role, changed[m.seq].content, changed[m.seq].tokens_after, m.state, m.created_at)
        if m.seq in changed
        else m
        for m in snap.messages
    ]
    summarizer = summarizer or summarizer_for(policy)
    previous = snap.previous_checkpoint.data if snap.previous_checkpoint else None
    try:
        summary = plan_summarize(
            view,
            policy,
            context_window=snap.raw_window,
            tokenizer=tokenizer,
            summarizer=summarizer,
            previous=previous,
            instructions=instructions,
            now=timezone.now().isoformat(),
            force=force,
            fixed_tokens=snap.fixed_tokens,
        )
    except EngineError as exc:
        if exc.code not in NO_SUMMARY_POSSIBLE:
            raise
        # Not a fault: the session is too short to split, or a summary would not be smaller. The
        # reversible part still stands; the note says why there is no checkpoint.
        outcome.notes.append(str(exc))
        return outcome
    tokens_of = {m.seq: m.tokens for m in view}
    gone = set(summary.summarized_seqs)
    # A kept message must not point the model at a message the summary replaces: such duplicate
    # references are not made, and those messages stay as they were.
    outcome.changes = [c for c in changes if c.seq in gone or not gone.intersection(c.refers_to)]
    kept = {c.seq: c for c in outcome.changes}
    remaining = sum(kept[m.seq].tokens_after if m.seq in kept else m.tokens for m in snap.messages if m.seq not in gone)
    outcome.summary = summary
    outcome.summary_rows = [(seq, tokens_of[seq]) for seq in summary.summarized_seqs]
    outcome.summarizer = getattr(summarizer, "name", type(summarizer).__name__)
    outcome.tokens_after = snap.used(remaining, summary.summary_tokens)
    return outcome


def preview(session: AgentSession, level: str, *, instructions: str = "") -> dict[str, Any]:
    """A dry run: what each strategy would do, with tokens before/after; writes nothing. Summaries
    are previewed with the offline summarizer, so a dry run never costs an API call."""
    snap = snapshot(session)
    try:
        outcome = plan(
            snap,
            level,
            summarizer=offline_summarizer(snap.policy),
            instructions=instructions,
            force=True,
        )
    except EngineError as exc:
        raise InvalidInput(str(exc), code=exc.code) from None
    return {
        "dry_run": True,
        "session": session.pk,
        "level": level,
        "upto_seq": snap.upto_seq,
        "tokens_before": outcome.tokens_before,
        "tokens_after": outcome.tokens_after,
        "saved_tokens": outcome.saved,
        "would_skip": outcome.saved < snap.policy.min_saving_tokens,
        "strategies": strategy_totals(outcome.items(snap.factor)),
        "items": outcome.items(snap.factor),
        "notes": outcome.notes,
        "checkpoint": outcome.summary.checkpoint if outcome.summary else None,
    }
