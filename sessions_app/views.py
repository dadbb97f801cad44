"""HTML pages. Same selectors and services as the API; no rule of their own."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render

from . import selectors
from .errors import NotFound


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness for load balancers and compose: the database answers."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})


def home(request: HttpRequest) -> HttpResponse:
    return redirect("web:projects" if request.user.is_authenticated else "login")


@login_required
def project_list(request: HttpRequest) -> HttpResponse:
    return render(request, "sessions_app/project_list.html", {"projects": selectors.project_list_for(request.user)})


@login_required
def project_detail(request: HttpRequest, project_id: int) -> HttpResponse:
    try:
        project = selectors.project_get_for(request.user, project_id)
    except NotFound:
        raise Http404("Project not found") from None
    sessions = selectors.session_list_for(
        request.user, project=project.pk, status=request.GET.get("status") or None, q=request.GET.get("q") or None
    )
    page = Paginator(sessions, 25).get_page(request.GET.get("page"))
    rows = [(session, selectors.session_status(session)) for session in page]
    return render(request, "sessions_app/project_detail.html", {"project": project, "page": page, "rows": rows})


@login_required
def session_detail(request: HttpRequest, session_id: int) -> HttpResponse:
    try:
        session = selectors.session_get_for(request.user, session_id)
    except NotFound:
        raise Http404("Session not found") from None
    status = selectors.session_status(session)
    messages = selectors.message_list(session, state="all").order_by("-seq")[:200]
    return render(
        request,
        "sessions_app/session_detail.html",
        {"session": session, "status": status, "messages": list(reversed(list(messages)))},
    )
