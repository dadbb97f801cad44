"""Store, then follow up: an interface's write that can set work off is one call here.

Each function runs the service that stores (messages appended, a transcript imported or uploaded, a
handoff and its continuation, the demo, a proxied exchange) and then sends what the stored messages set off to the
workers (``tasks.followup_send``: an automatic compaction, an exact count, webhook deliveries), and
what stored spend sets off (``spent``: budgets announced). The
services know nothing of workers; the interfaces (API, pages, CLI, the proxy's recorder) call these
instead of the services, so none can store and forget the follow-up
(``tests/architecture/test_steps.py`` holds them to it).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError

from sessions_app import tasks
from sessions_app.selectors import budgets as budget_reads
from sessions_app.services import budgets, demo, handoffs, importing, ingest, proxy, transcript_sync

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

    from compaction.messages import NormalizedMessage
    from sessions_app.models import AgentSession, HandoffDocument, Project


def messages_append(*, session: AgentSession, messages: list[NormalizedMessage]) -> ingest.AppendResult:
    """``ingest.message_append``, then its follow-up. ``result.session`` is current: reread when a
    compaction ran in-process meanwhile (the embedded mode)."""
    result = ingest.message_append(session=session, messages=messages)
    if result.created and tasks.followup_send(result.session):  # the row just written: its totals are current
        result.session.refresh_from_db()
    return result


def transcript_import(**kwargs: Any) -> importing.ImportResult:
    """``importing.session_import`` (same arguments), then the follow-up of every session it filled."""
    result = importing.session_import(**kwargs)
    tasks.followup_send(*result.appended_to)
    spent(budget_reads.session_project(result.session), None)
    return result


def transcript_upload(**kwargs: Any) -> transcript_sync.SyncResult:
    """``transcript_sync.transcript_sync`` (same arguments), then the follow-up of every session the
    upload added to."""
    result = transcript_sync.transcript_sync(**kwargs)
    tasks.followup_send(*result.appended_to)
    if result.appended_to:
        spent(budget_reads.session_project(result.session), None)
    return result


def handoff_create(*, session: AgentSession, user: User | None, continue_: bool) -> HandoffDocument:
    """``handoffs.handoff_create``, then its webhook deliveries and the continuation's follow-up."""
    document = handoffs.handoff_create(session=session, user=user, continue_=continue_)
    tasks.webhooks_send()
    if document.continuation_id:
        tasks.followup_send(document.continuation_id)
    return document


def demo_load() -> demo.DemoResult:
    """``demo.demo_load``, then the follow-up of the sessions it created."""
    result = demo.demo_load()
    if result.created:
        tasks.followup_send(*(s.pk for s in result.sessions))
    return result


def proxy_exchange_record(**kwargs: Any) -> AgentSession | None:
    """``proxy.proxy_record_answered`` (same arguments: what an exchange leaves to record once its
    answer is out, and the row of what the upstream answered), then the follow-up of the session it
    recorded in."""
    recorded = proxy.proxy_record_answered(**kwargs)
    if recorded is not None:
        tasks.followup_send(recorded)
        answered = kwargs.get("answered")
        if answered is not None:
            spent(budget_reads.session_project(recorded), answered.api_key_id)
    return recorded


def spent(project: Project | int, api_key_id: int | None) -> None:
    """The step after a provider's request was stored (its ``ProviderRequest`` row committed, so
    concurrent recorders each sum the others' rows): the budgets it crossed are announced
    (``budgets.budgets_check``), their deliveries sent. A transcript's rows carry no key."""
    try:
        announced = budgets.budgets_check(project=project, api_key_id=api_key_id)
    except DatabaseError as exc:  # what was stored stays; the next stored request announces it
        log.warning("budgets of project %s not checked: %s", getattr(project, "pk", project), type(exc).__name__)
        return
    if announced:
        tasks.webhooks_send()


def proxy_request_record(*, session: AgentSession, body: dict[str, Any], key: str) -> proxy.Recorded:
    """``proxy.proxy_record_request`` before the request goes upstream, then its follow-up (in the
    embedded mode a compaction it queued has run: ``done.session`` is reread)."""
    done = proxy.proxy_record_request(session=session, body=body, key=key)
    if done.appended:
        tasks.followup_send(done.session)
        done.session.refresh_from_db()
    return done
