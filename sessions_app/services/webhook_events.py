"""What a webhook is told: the services that change a session call these inside their own
transaction, so an event is recorded (an outbox row per subscribed webhook) exactly when the change
commits, and never when it rolls back. Sending is the callers' next step (``tasks.webhooks_send``),
with a beat job every minute as the safety net."""

from __future__ import annotations

import copy
from contextlib import nullcontext
from typing import Any

from django.conf import settings
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from compaction.policy import Policy
from sessions_app.models import (
    AgentSession,
    Compaction,
    HandoffDocument,
    Project,
    Webhook,
    WebhookDelivery,
    WebhookEvent,
    WebhookFormat,
)
from sessions_app.selectors import sql_rows
from sessions_app.selectors.usage import session_usage


def webhook_event_record(
    *, project: Project | int, event: str, session: AgentSession | None, data: dict[str, Any]
) -> list[int]:
    """One pending delivery per enabled webhook of the project that wants ``event``; their ids."""
    project_id = project if isinstance(project, int) else project.pk
    hooks = [h for h in Webhook.objects.filter(project_id=project_id, enabled=True) if event in h.events]
    if not hooks:
        return []
    body = _payload(project_id, event, session, data)
    now = timezone.now()
    rows = WebhookDelivery.objects.bulk_create(
        WebhookDelivery(
            webhook=hook,
            event=event,
            payload=slack_payload(body) if hook.format == WebhookFormat.SLACK else body,
            next_attempt_at=now,
        )
        for hook in hooks
    )
    return [row.pk for row in rows]


def session_level_record(session: AgentSession, *, policy: Policy | None = None) -> bool:
    """Stores the session's level and usage (``AgentSession.level``/``usage_percent``) from the totals
    of the row given, and records ``session.level_changed`` when the level moved (not when it was
    never worked out before). Every path that changes a session's usage ends here. The UPDATE is
    conditional on the level and the totals it was worked out from: of concurrent callers, each change
    is announced once, and figures from totals that have moved since are not written over newer ones
    (whoever moved them notes them). True when a webhook is to be told (a delivery was recorded)."""
    current = session_usage(session, policy=policy)
    level, percent = current.level.value, current.usage_percent
    before = session.level
    if before == level and session.usage_percent == percent:
        return False  # most appends: the append's own UPDATE wrote the figure (``ingest._store``)
    # A transaction only when a level change is to be announced with it (most calls move the percent).
    with transaction.atomic() if before and before != level else nullcontext():
        moved = sql_rows.update_if(
            AgentSession,
            session.pk,
            {"level": level, "usage_percent": percent},
            {"level": before, **usage_inputs(session)},
        )
        if moved:
            session.level, session.usage_percent = level, percent
        if not moved or not before or before == level:
            return False
        recorded = webhook_event_record(
            project=session.project_id,
            event=WebhookEvent.LEVEL_CHANGED,
            session=session,
            data={
                "from": before,
                "to": level,
                "used": current.used,
                "context_window": current.context_window,
                "usage_percent": current.usage_percent,
            },
        )
        return bool(recorded)


def session_figures_record(session: AgentSession, values: dict[str, Any], unchanged: dict[str, Any]) -> bool:
    """``values`` (columns the session's usage is worked out from) written with the level and usage
    they give, in one UPDATE, while ``unchanged`` and the row's figures still hold as the row given
    has them: ``session_level_record``'s work in the same statement, for callers that move a figure
    (the exact count of a proxied exchange's reply). Only when that announces nothing (the level
    stays, or was never worked out): False then, and when the row had moved; nothing is written and
    the caller writes ``values`` its own way. True: written, and set on ``session``."""
    inputs = usage_inputs(session)
    if any(field in inputs and inputs[field] != value for field, value in unchanged.items()):
        return False  # the row given is not the one the condition describes
    after = copy.copy(session)
    for field, value in values.items():
        setattr(after, field, value)
    current = session_usage(after)
    level, percent = current.level.value, current.usage_percent
    if session.level and session.level != level:
        return False  # a change to announce: ``session_level_record`` does, in its transaction
    written = {**values, "level": level, "usage_percent": percent}
    if not sql_rows.update_if(AgentSession, session.pk, written, {**inputs, **unchanged, "level": session.level}):
        return False
    for field, value in written.items():
        setattr(session, field, value)
    return True


def usage_inputs(session: AgentSession) -> dict[str, Any]:
    """The session's columns its usage is worked out from (with its model's profile and its project's
    policy), as filter arguments: "still as they were when these figures were worked out"."""
    return {field: getattr(session, field) for field in USAGE_INPUTS}


USAGE_INPUTS = (
    "model",
    "harness_read_tokens",
    "harness_raw_tokens",
    "context_window_override",
    "context_window_learnt",
    "last_seq",
    "message_tokens",
    "summary_tokens",
    "system_tokens",
    "tool_tokens",
    "exact_tokens",
    "exact_upto_seq",
)


def compaction_succeeded(session: AgentSession, record: Compaction) -> None:
    before, after = record.tokens_before or 0, record.tokens_after or 0
    webhook_event_record(
        project=session.project_id,
        event=WebhookEvent.COMPACTION_SUCCEEDED,
        session=session,
        data={
            "compaction": record.pk,
            "level": record.level,
            "trigger": record.trigger,
            "tokens_before": before,
            "tokens_after": after,
            "saved_tokens": before - after,
        },
    )
    session_level_record(session)


def compaction_failed(session: AgentSession, record: Compaction, *, paused_now: bool) -> None:
    data = {
        "compaction": record.pk,
        "level": record.level,
        "trigger": record.trigger,
        "error": record.error,
        "failures_in_a_row": session.compaction_failures,
    }
    # Pausing is told as its own event with the same facts, for hooks that only watch pauses.
    events = [WebhookEvent.COMPACTION_FAILED] + ([WebhookEvent.SESSION_PAUSED] if paused_now else [])
    for event in events:
        webhook_event_record(project=session.project_id, event=event, session=session, data=data)


def handoff_written(session: AgentSession, document: HandoffDocument) -> None:
    webhook_event_record(
        project=session.project_id,
        event=WebhookEvent.HANDOFF_WRITTEN,
        session=session,
        data={
            "handoff": document.pk,
            "continuation": document.continuation_id,
            "download": settings.CTX_PUBLIC_URL + reverse("api:handoff-download", args=[document.pk]),
        },
    )


def _payload(project_id: int, event: str, session: AgentSession | None, data: dict[str, Any]) -> dict[str, Any]:
    project = Project.objects.only("name").get(pk=project_id)
    return {
        "event": event,
        "created_at": timezone.now().isoformat(),
        "project": {"id": project_id, "name": project.name},
        "session": None
        if session is None
        else {
            "id": session.pk,
            "name": session.name,
            "external_id": session.external_id,
            "url": settings.CTX_PUBLIC_URL + reverse("web:session", args=[session.pk]),
        },
        "data": data,
    }


def slack_payload(body: dict[str, Any]) -> dict[str, Any]:
    """What Slack's incoming webhooks (and Mattermost's, Discord's /slack) take: one line of text."""
    return {"text": describe(body)}


def describe(body: dict[str, Any]) -> str:
    data, session = body["data"], body.get("session")
    where = f"<{session['url']}|{session['name'] or 'session ' + str(session['id'])}>" if session else ""
    project = body["project"]["name"]
    match body["event"]:
        case WebhookEvent.LEVEL_CHANGED:
            what = f"{where} went from {data['from']} to *{data['to']}* ({data['usage_percent']}% of the window)"
        case WebhookEvent.COMPACTION_SUCCEEDED:
            what = (
                f"{where}: {data['level']} compaction saved {data['saved_tokens']:,} tokens "
                f"({data['tokens_before']:,} → {data['tokens_after']:,})"
            )
        case WebhookEvent.COMPACTION_FAILED:
            what = f"{where}: {data['level']} compaction failed: {data['error'][:300]}"
        case WebhookEvent.SESSION_PAUSED:
            what = f"{where}: automatic compaction paused after {data['failures_in_a_row']} failures in a row"
        case WebhookEvent.HANDOFF_WRITTEN:
            what = f"{where}: handoff document written (<{data['download']}|download>)"
        case WebhookEvent.BUDGET_WARNING | WebhookEvent.BUDGET_EXCEEDED:
            reached = "reached" if body["event"] == WebhookEvent.BUDGET_EXCEEDED else "is at 80 % of"
            what = (
                f"spend {reached} the {data['name']}: ${float(data['spent_usd']):,.2f} "
                f"({data['percent']} %) since {data['period_start']}"
            )
        case _:
            what = data.get("message", body["event"])
    return f"[{project}] {what}"
