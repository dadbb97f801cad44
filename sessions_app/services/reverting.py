"""Revert: the newest succeeded compaction of a session, within its window, restores every message
it changed byte for byte (content, token counts, state, the compaction that changed it before)."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from sessions_app.models import BULK_UPDATE_BATCH, CONTEXT_STATES, AgentSession, Compaction, CompactionStatus, Message
from sessions_app.selectors import model_context
from sessions_app.selectors.compactions import revert_refusal
from sessions_app.services import spend_rollup
from sessions_app.services.webhook_events import session_level_record


def compaction_revert(*, compaction: Compaction) -> Compaction:
    """Restore every message the compaction changed, byte for byte. Only the newest succeeded
    compaction of the session, only within its revert window, and not while another one runs."""
    now = timezone.now()
    with transaction.atomic():
        session = AgentSession.objects.select_for_update().get(pk=compaction.session_id)
        record = Compaction.objects.select_for_update().get(pk=compaction.pk)
        refusal = revert_refusal(record, now=now)
        if refusal is not None:
            raise refusal
        backups = list(record.backups.all())
        rows = {m.pk: m for m in Message.objects.select_for_update().filter(pk__in=[b.message_id for b in backups])}
        for backup in backups:
            row = rows[backup.message_id]
            row.content, row.tokens, row.tokens_exact = backup.content, backup.tokens, backup.tokens_exact
            row.state, row.compaction_id = backup.state, backup.previous_compaction_id
        Message.objects.bulk_update(
            list(rows.values()),
            ["content", "tokens", "tokens_exact", "state", "compaction"],
            batch_size=BULK_UPDATE_BATCH,
        )
        record.checkpoints.update(reverted=True)
        record.status = CompactionStatus.REVERTED
        record.reverted_at = now
        record.save(update_fields=["status", "reverted_at"])
        # Out of force: the session's requests it saved are saved that much less (rows and rollup).
        spend_rollup.session_savings_refresh(session.pk)
        _totals_refresh(session)
        session_level_record(session)
    return record


def _totals_refresh(session: AgentSession) -> None:
    """Recompute the context totals from the rows (revert is rare; exactness matters more than speed)."""
    agg = Message.objects.filter(session=session, state__in=CONTEXT_STATES).aggregate(n=Count("id"), t=Sum("tokens"))
    checkpoint = model_context.current_checkpoint(session)
    session.active_message_count = agg["n"] or 0
    session.message_tokens = agg["t"] or 0
    session.summary_tokens = checkpoint.tokens if checkpoint else 0
    session.exact_upto_seq = None
    session.save(
        update_fields=["active_message_count", "message_tokens", "summary_tokens", "exact_upto_seq", "updated_at"]
    )
