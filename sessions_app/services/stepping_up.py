"""Stepping up to handoff: an automatic run that could not bring its session down to the target.

A window too small for what a run must keep — the system prompt and tools, the protected newest
messages, and a checkpoint with the user's words, the newest prose, the todo list, open errors and
files (``compaction.room``) — leaves the session above its target however often it is compacted. The
run then says so (a note STATUS shows among its warnings) and steps up to the handoff level: a
handoff document the agent can start a fresh session from, as the handoff level writes one.
"""

from __future__ import annotations

from compaction.types import Level
from sessions_app.models import STEP_UP_NOTE, AgentSession, Compaction, CompactionStatus, HandoffDocument
from sessions_app.selectors import usage
from sessions_app.services.handoffs import handoff_auto_document
from sessions_app.services.planning import Snapshot


def above_target(record: Compaction, snap: Snapshot) -> bool:
    """Whether the finished automatic run ``record`` left its session above the policy's target."""
    done = Compaction.objects.filter(pk=record.pk).values("status", "tokens_after").first()
    if done is None or done["status"] not in (CompactionStatus.SUCCEEDED, CompactionStatus.SKIPPED):
        return False
    after = done["tokens_after"]
    return after is not None and after > snap.policy.target_after * snap.window


def compaction_step_up(record: Compaction, snap: Snapshot, *, document: HandoffDocument | None = None) -> None:
    """Record why ``record`` ended above the target, write the handoff document (unless the run, a
    handoff already, wrote ``document``) and mark the run a handoff. Called after the run was
    applied; the figures are the session's as it left it."""
    session = AgentSession.objects.select_related("project", "project__policy").get(pk=record.session_id)
    now = usage.session_usage(session)
    target = int(snap.policy.target_after * snap.window)
    fixed = now.system_prompt + now.tool_definitions
    note = (
        f"{STEP_UP_NOTE}: the {now.context_window:,}-token window is too small for what a compaction must "
        f"keep under the target ({target:,} tokens, {snap.policy.target_after:.0%}): the system prompt and "
        f"tools take {fixed:,}, the newest messages {now.messages:,} and the checkpoint (the user's words, the "
        f"newest prose, the todo list, open errors, files) {now.summary:,}, so usage stays at "
        f"{now.usage_percent:.0f}%. Start a fresh session from the handoff document, or use a model with a "
        "larger window."
    )
    if document is None:
        document = handoff_auto_document(record)
    current = Compaction.objects.get(pk=record.pk)
    current.level = Level.HANDOFF.value
    current.notes = [*current.notes, f"{note} (handoff document {document.pk})"]
    current.save(update_fields=["level", "notes"])
