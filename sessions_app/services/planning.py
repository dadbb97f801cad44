"""Planning a compaction: a snapshot of the session's context, the engine's reversible changes and,
when the level calls for it, a summary of the older turns. Reads only; writes nothing."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from django.utils import timezone

from compaction.errors import EngineError
from compaction.policy import Policy
from compaction.reversible import Change
from compaction.runs import plan_run
from compaction.summarize import Summarizer, SummaryPlan
from compaction.tokens import DEFAULT_FRAMING, calibrate
from compaction.types import Level, Msg
from sessions_app.engine import offline_summarizer, offline_tokenizer
from sessions_app.errors import InvalidInput
from sessions_app.models import CONTEXT_STATES, AgentSession, Checkpoint, Message
from sessions_app.selectors import model_context, usage
from sessions_app.selectors.compactions import strategy_totals
from sessions_app.services.summarizers import summarizer_choice

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
    fixed_tokens: int  # raw: system prompt + tools + request framing (+ the harness, below)
    previous_checkpoint: Checkpoint | None
    rows: dict[int, tuple[str, Any, int, str]] = field(default_factory=dict)  # seq → (role, content, tokens, state)
    # A recorded transcript's harness (usage.harness_tokens), calibrated as STATUS has it, and in raw
    # tokens within ``fixed_tokens``: the engine plans around it as around the system prompt.
    harness: int = 0
    harness_raw: int = 0

    @property
    def engine_policy(self) -> Policy:
        """The policy with its token budgets in raw offline tokens, the engine's unit: a budget is
        set in STATUS units (what the user sees), so a 500-token summary shows as at most 500."""
        return replace(
            self.policy,
            summary_budget=max(1, int(self.policy.summary_budget / self.factor)),
            protect_tool_tokens=int(self.policy.protect_tool_tokens / self.factor),
        )

    @property
    def raw_window(self) -> int:
        """The window in raw offline tokens, the unit the engine counts in."""
        return max(1, int(self.window / self.factor))

    def used(self, message_tokens: int, summary_tokens: int) -> int:
        """Calibrated ``used`` of STATUS for the given raw message and summary totals. Each part is
        calibrated on its own and the parts added, as STATUS does: rounding the total once could be a
        token off, and a run's saving would then differ from what STATUS shows."""
        system, tools = self.session.system_tokens, self.session.tool_tokens
        framing = self.fixed_tokens - system - tools - self.harness_raw
        parts = (system, tools, framing + message_tokens, summary_tokens)
        return sum(calibrate(part, self.factor) for part in parts) + self.harness

    def fraction(self, message_tokens: int, summary_tokens: int) -> float:
        return self.used(message_tokens, summary_tokens) / self.window if self.window else 1.0


def snapshot(session: AgentSession) -> Snapshot:
    info = usage.model_info(session.model)
    policy = usage.policy_for(session)
    rows = list(
        Message.objects.filter(session=session, state__in=CONTEXT_STATES, seq__lte=session.last_seq)
        .order_by("seq")
        .values_list("seq", "role", "content", "tokens", "state", "created_at", "metadata")
    )
    messages = [
        Msg(
            seq=seq,
            role=role,
            content=content,
            tokens=tokens,
            state=state,
            created_at=created.isoformat(),
            flags={"meta": True} if _injected(metadata) else {},
        )
        for seq, role, content, tokens, state, created, metadata in rows
    ]
    harness = usage.harness_tokens(session, info.calibration)
    harness_raw = math.ceil(harness / info.calibration) if info.calibration > 0 else harness
    return Snapshot(
        session=session,
        policy=policy,
        upto_seq=session.last_seq,
        messages=messages,
        factor=info.calibration,
        window=usage.session_window(session, info),
        fixed_tokens=session.system_tokens + session.tool_tokens + DEFAULT_FRAMING.request + harness_raw,
        previous_checkpoint=model_context.current_checkpoint(session),
        rows={seq: (role, content, tokens, state) for seq, role, content, tokens, state, _, _ in rows},
        harness=harness,
        harness_raw=harness_raw,
    )


def engine_message(row: Message) -> Msg:
    """A stored message as the engine sees it."""
    return Msg(
        seq=row.seq,
        role=row.role,
        content=row.content,
        tokens=row.tokens,
        state=row.state,
        created_at=row.created_at.isoformat(),
        flags={"meta": True} if _injected(row.metadata) else {},
    )


def _injected(metadata: Any) -> bool:
    """A user-role line the agent's tool wrote, not a person (Claude Code's ``isMeta`` prompts, its
    compaction summaries): not quoted among the user's words."""
    return isinstance(metadata, dict) and any(
        metadata.get(flag) is True for flag in ("is_meta", "is_compact_summary", "visible_in_transcript_only")
    )


# ----------------------------------------------------------------------------- planning


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
    """The engine's run for ``level`` (``compaction.runs``): down to the policy's target, reversible
    strategies first when the policy says so. ``force``: a person asked (manual runs)."""
    engine_policy = snap.engine_policy
    message_tokens = sum(m.tokens for m in snap.messages)
    summary_tokens = snap.session.summary_tokens
    note = ""
    if summarizer is None:
        choice = summarizer_choice(snap.session.project, snap.policy)
        summarizer, note = choice.summarizer, choice.note
    run = plan_run(
        snap.messages,
        engine_policy,
        level=Level(level),
        manual=force,
        context_window=snap.raw_window,
        fixed_tokens=snap.fixed_tokens,
        summary_tokens=summary_tokens,
        tokenizer=offline_tokenizer(),
        summarizer=summarizer,
        previous=snap.previous_checkpoint.data if snap.previous_checkpoint else None,
        instructions=instructions,
        now=timezone.now().isoformat(),
    )
    before = snap.used(message_tokens, summary_tokens)
    kept = {c.seq: c for c in run.changes}
    gone = set(run.summary.summarized_seqs) if run.summary else set()
    remaining = sum(kept[m.seq].tokens_after if m.seq in kept else m.tokens for m in snap.messages if m.seq not in gone)
    outcome = Outcome(level, run.changes, run.summary, before, before, notes=run.notes)
    if run.summary is None:
        outcome.tokens_after = snap.used(remaining, summary_tokens)
        return outcome
    tokens_of = {m.seq: m.tokens for m in snap.messages}
    outcome.summary_rows = [(seq, kept[seq].tokens_after if seq in kept else tokens_of[seq]) for seq in gone]
    outcome.summary_rows.sort()
    outcome.summarizer = getattr(summarizer, "name", type(summarizer).__name__)
    if note:
        outcome.notes.append(note)
    outcome.tokens_after = snap.used(remaining, run.summary.summary_tokens)
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
        "would_skip": outcome.saved < snap.policy.min_saving(snap.window),
        "strategies": strategy_totals(outcome.items(snap.factor)),
        "items": outcome.items(snap.factor),
        "notes": outcome.notes,
        "checkpoint": outcome.summary.checkpoint if outcome.summary else None,
    }
