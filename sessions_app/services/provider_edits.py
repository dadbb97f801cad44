"""A provider's context editing, recorded (the proxy's answers say what it did): Anthropic's
``clear_tool_uses`` edit cleared the oldest tool results before its model read the request, so the
session's stored context clears them too, under a succeeded compaction with trigger ``provider`` —
on the session page and its chart beside ctxweb's own, revertible like them (the agent kept its full
history, and so do the backups). What is cleared is worked out by ``compaction.provider_edits``."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from compaction.provider_edits import tool_uses_cleared
from compaction.tokens import calibrate
from compaction.types import Level
from sessions_app.engine import offline_tokenizer
from sessions_app.models import (
    BULK_UPDATE_BATCH,
    CONTEXT_STATES,
    AgentSession,
    Compaction,
    CompactionStatus,
    Message,
    MessageBackup,
    MessageState,
)
from sessions_app.selectors import usage
from sessions_app.services import ingest, spend_rollup
from sessions_app.services.boundaries import PROVIDER

log = logging.getLogger(__name__)


def provider_edits_apply(*, session: AgentSession, reply_seq: int, applied: Any, requested: Any) -> list[Compaction]:
    """The edits a response says were applied (``context_management.applied_edits``) to the request
    whose reply is stored at ``reply_seq``, as configured in the request (``requested``: its
    ``context_management.edits``). Edits of other kinds (clearing thinking) change nothing stored."""
    made = []
    asked = [e for e in requested if isinstance(e, dict)] if isinstance(requested, list) else []
    for edit in applied if isinstance(applied, list) else []:
        kind = edit.get("type") if isinstance(edit, dict) else None
        cleared = edit.get("cleared_tool_uses") if isinstance(edit, dict) else None
        if not isinstance(kind, str) or not kind.startswith("clear_tool_uses"):
            continue
        if not isinstance(cleared, int) or isinstance(cleared, bool) or cleared <= 0:
            continue
        config = next((e for e in asked if e.get("type") == kind), {})
        excluded = config.get("exclude_tools")
        record = tool_clearing_apply(
            session=session,
            reply_seq=reply_seq,
            count=cleared,
            excluded=[t for t in excluded if isinstance(t, str)] if isinstance(excluded, list) else [],
            inputs_too=config.get("clear_tool_inputs") is True,
        )
        if record is not None:
            made.append(record)
    return made


def tool_clearing_apply(
    *, session: AgentSession, reply_seq: int, count: int, excluded: list[str], inputs_too: bool
) -> Compaction | None:
    """The oldest ``count`` tool results before ``reply_seq`` cleared in the stored context (once: a
    result cleared already stays as it is); None when none was left to clear."""
    tokenizer = offline_tokenizer()
    with transaction.atomic():
        locked = ingest.lock_open_session(session)
        rows = list(
            Message.objects.select_for_update()
            .filter(session=locked, state__in=CONTEXT_STATES, seq__lt=reply_seq)
            .order_by("seq")
        )
        changes = tool_uses_cleared(
            [(r.seq, r.content) for r in rows], count=count, excluded=excluded, inputs_too=inputs_too
        )
        if not changes:
            return None
        info, policy = usage.model_info(locked.model), usage.policy_for(locked)
        now = timezone.now()
        record = Compaction.objects.create(
            session=locked,
            project_id=locked.project_id,
            level=Level.COMPACT.value,
            status=CompactionStatus.SUCCEEDED,
            trigger=PROVIDER,
            upto_seq=max(changes),
            tokens_before=usage.session_usage(locked, policy=policy).used,
            notes=[
                f"Made by the model's provider (context editing): {count} tool use(s) cleared before its model "
                "read the request."
            ],
            started_at=now,
            finished_at=now,
            revertible_until=now + timedelta(hours=policy.revert_hours),
        )
        changed = [r for r in rows if r.seq in changes]
        MessageBackup.objects.bulk_create(MessageBackup.of(record, r) for r in changed)
        items, delta = [], 0
        for row in changed:
            tokens = tokenizer.count_message(row.role, changes[row.seq])
            items.append(
                {
                    "strategy": "tool_output",
                    "seq": row.seq,
                    "tokens_before": calibrate(row.tokens, info.calibration),
                    "tokens_after": calibrate(tokens, info.calibration),
                }
            )
            delta += tokens - row.tokens
            row.content, row.tokens, row.tokens_exact = changes[row.seq], tokens, None
            row.state, row.compaction = MessageState.COMPACTED, record
        Message.objects.bulk_update(
            changed, ["content", "tokens", "tokens_exact", "state", "compaction"], batch_size=BULK_UPDATE_BATCH
        )
        locked.message_tokens += delta
        locked.exact_upto_seq = None  # an exact count described the context before
        locked.save(update_fields=["message_tokens", "exact_upto_seq", "updated_at"])
        record.items = items
        record.tokens_after = usage.session_usage(locked, policy=policy).used
        record.save(update_fields=["items", "tokens_after"])
        spend_rollup.session_savings_refresh(locked.pk)
    log.info("proxy: session %s: %s message(s) cleared by the provider's context editing", session.pk, len(changed))
    return record
