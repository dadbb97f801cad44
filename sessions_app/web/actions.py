"""What the session page can do: preview and run a compaction, revert one, write a handoff.
Members and admins only (viewers get 403); each calls one service."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from sessions_app import steps, tasks
from sessions_app.errors import ServiceError
from sessions_app.models import Role
from sessions_app.selectors import compactions
from sessions_app.services import compaction_runs, planning, reverting
from sessions_app.web.access import AuthenticatedHttpRequest, compaction_for, session_for
from sessions_app.web.forms import CompactionForm, HandoffForm
from sessions_app.web.views import is_htmx, render_session


def _back(session_id: int, anchor: str = "") -> HttpResponse:
    return redirect(reverse("web:session", args=[session_id]) + anchor)


@login_required
@require_POST
def compaction_preview(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    session = session_for(request, session_id, min_role=Role.MEMBER)
    form = CompactionForm(request.POST)
    if not form.is_valid():
        return render_session(request, session, compaction_form=form, status=400)
    try:
        preview = planning.preview(session, form.cleaned_data["level"], instructions=form.cleaned_data["instructions"])
    except ServiceError as exc:
        form.add_error(None, exc.detail)
        return render_session(request, session, compaction_form=form, status=400)
    if is_htmx(request):
        return render(request, "sessions_app/_preview.html", {"session": session, "preview": preview})
    return render_session(request, session, preview=preview, compaction_form=form)


@login_required
@require_POST
def compaction_run(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    session = session_for(request, session_id, min_role=Role.MEMBER)
    form = CompactionForm(request.POST)
    if not form.is_valid():
        return render_session(request, session, compaction_form=form, status=400)
    try:
        record = compaction_runs.compaction_request(
            session=session,
            level=form.cleaned_data["level"],
            user=request.user,
            instructions=form.cleaned_data["instructions"],
        )
        tasks.compaction_send(record.pk)
    except ServiceError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"Compaction {record.pk} ({record.level}) queued; this page follows it live.")
    return _back(session.pk, "#compactions")


@login_required
@require_http_methods(["GET", "POST"])
def compaction_revert(request: AuthenticatedHttpRequest, compaction_id: int) -> HttpResponse:
    """GET: the confirm step (what will be restored, or why it can't be); POST: revert."""
    record = compaction_for(request, compaction_id, min_role=Role.MEMBER)
    if request.method == "GET":
        refusal = compactions.revert_refusal(record)
        return render(
            request,
            "sessions_app/revert_confirm.html",
            {"record": record, "session": record.session, "refusal": refusal, "changed": record.backups.count()},
        )
    try:
        reverting.compaction_revert(compaction=record)
        tasks.webhooks_send()
    except ServiceError as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(request, f"Compaction {record.pk} reverted: every message it changed is back as it was.")
    return _back(record.session_id, "#compactions")


@login_required
@require_POST
def handoff_create(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    session = session_for(request, session_id, min_role=Role.MEMBER)
    form = HandoffForm(request.POST)
    if not form.is_valid():
        return render_session(request, session, handoff_form=form, status=400)
    try:
        document = steps.handoff_create(
            session=session, user=request.user, continue_=form.cleaned_data["continue_session"]
        )
    except ServiceError as exc:
        messages.error(request, exc.detail)
        return _back(session.pk, "#handoffs")
    if document.continuation_id:
        messages.success(request, f"Handoff {document.pk} written; this is the session that continues from it.")
        return _back(document.continuation_id)
    messages.success(request, f"Handoff {document.pk} written.")
    return _back(session.pk, "#handoffs")


@login_required
@require_POST
def session_retry(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    """The dashboard's Retry: run again what failed (members and admins)."""
    session = session_for(request, session_id, min_role=Role.MEMBER)
    try:
        record = compaction_runs.compaction_retry(session=session, user=request.user)
        tasks.compaction_send(record.pk)
    except ServiceError as exc:
        messages.error(request, f"{session}: {exc.detail}")
    else:
        messages.success(request, f"{session}: {record.level} compaction {record.pk} queued.")
    return redirect(reverse("web:project", args=[session.project_id]) + "#dashboard")
