"""HTML pages. Same selectors and services as the API; no rule of their own.

Outside a user's projects everything is 404; a member whose role does not allow a write gets 403
(forms for it are not even shown). Writes live in ``actions`` and ``project_settings``;
``access`` answers the access rules as 404 and 403 pages.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse

from sessions_app.models import AgentSession, Message
from sessions_app.selectors import access, sub_agents
from sessions_app.selectors.search import query_terms
from sessions_app.web import pages
from sessions_app.web.access import AuthenticatedHttpRequest, message_for, project_for, session_for
from sessions_app.web.forms import CompactionForm, HandoffForm, SessionFilterForm
from sessions_app.web.request_panel import requests_page, requests_panel

SESSIONS_PER_PAGE = 25
MCP_CALLS_SHOWN = 10


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness for load balancers and compose: the database answers."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"ok": True})


def home(request: HttpRequest) -> HttpResponse:
    return redirect("web:projects" if request.user.is_authenticated else "login")


# ----------------------------------------------------------------------------- access


def is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


# ----------------------------------------------------------------------------- pages


@login_required
def project_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    if request.GET.get("go"):  # the header's project switcher
        return redirect("web:project", project_for(request, request.GET["go"]).pk)
    return render(request, "sessions_app/project_list.html", {"projects": access.project_list_for(request.user)})


@login_required
def project_detail(request: AuthenticatedHttpRequest, project_id: int) -> HttpResponse:
    project = project_for(request, project_id)
    members = [(m.user_id, m.user.username) for m in access.memberships_of(project)]
    filters = SessionFilterForm(request.GET, members=members)
    values = filters.cleaned_data if filters.is_valid() else {}
    sessions = access.session_list_for(
        request.user,
        project=project.pk,
        status=values.get("status") or None,
        q=values.get("q") or None,
        model=values.get("model") or None,
        owner=values.get("owner"),
        key=values.get("key"),
    ).defer(*pages.LIST_DEFERRED)
    if values.get("level"):
        sessions = pages.sessions_at_level(sessions, level=values["level"])
    # The sessions are paged, then their rows take their place on the page.
    paginator: Paginator[Any] = Paginator(sub_agents.with_sub_agent_links(sessions), SESSIONS_PER_PAGE)
    page = paginator.get_page(request.GET.get("page"))
    page.object_list = pages.session_rows(page.object_list)
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "sessions_app/project_detail.html",
        {
            "project": project,
            "page": page,
            "filters": filters,
            "query": query.urlencode(),
            "is_admin": pages.is_admin(request.user, project.pk),
            # The overview on the project's own page; a search or a page of the list is about the list.
            **(pages.dashboard_panel(project, request.user) if not request.GET else {}),
        },
    )


def render_session(
    request: AuthenticatedHttpRequest, session: AgentSession, *, status: int = 200, **extra: Any
) -> HttpResponse:
    """The session page; actions re-render it with a bound form (errors) or a preview."""
    context = pages.session_page(session, request.user)
    context.update(
        {
            "entries": pages.timeline(session),
            "compaction_form": CompactionForm(),
            "handoff_form": HandoffForm(),
            "requests": requests_panel(session, page=request.GET.get("requests")),
            "mcp_calls": list(session.mcp_calls.order_by("-created_at", "-pk")[:MCP_CALLS_SHOWN]),
            **extra,
        }
    )
    return render(request, "sessions_app/session_detail.html", context, status=status)


@login_required
def session_detail(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    return render_session(request, session_for(request, session_id))


@login_required
def session_live(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    """Polled by the page: 204 while nothing changed; otherwise the fresh usage and compaction panel,
    and an ``HX-Trigger`` that makes the timeline reload itself."""
    session = session_for(request, session_id)
    version = pages.live_version(session)
    if request.GET.get("v") == version:
        return HttpResponse(status=204)
    response = render(request, "sessions_app/_live.html", pages.live_panel(session, request.user, version=version))
    response["HX-Trigger"] = "session-changed"
    return response


@login_required
def session_timeline(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    session = session_for(request, session_id)
    return render(request, "sessions_app/_timeline.html", {"session": session, "entries": pages.timeline(session)})


@login_required
def session_requests(request: AuthenticatedHttpRequest, session_id: int) -> HttpResponse:
    """A page of the session's provider requests: the pager's rows (htmx), else the session page at it."""
    session = session_for(request, session_id)
    if not is_htmx(request):
        query = urlencode({"requests": request.GET.get("page", "")})
        return redirect(f"{reverse('web:session', args=[session.pk])}?{query}#requests")
    page = requests_page(session, page=request.GET.get("page"))
    return render(request, "sessions_app/_request_rows.html", {"session": session, "page": page})


def _message_page(
    request: HttpRequest, message: Message, blocks: list[pages.Block] | None, *, original: bool
) -> HttpResponse:
    """A whole message, PAGE_CHARS characters at a time: however large, each answer stays a page."""
    # Ignored: Django's Paginator takes "a sliceable object with a count() or __len__() method" and only
    # slices it; the stubs' protocol also asks for indexing and iteration, which MessageText has no use for.
    text = pages.MessageText(blocks or [])
    paginator: Paginator[pages.Block] = Paginator(text, pages.PAGE_CHARS)  # type: ignore[arg-type]
    terms = query_terms(request.GET.get("q", ""))[:10]
    # From a search: the page where a term first shows, each term marked.
    page = paginator.get_page(request.GET.get("page") or _first_page_with(blocks or [], terms))
    context = {"session": message.session, "message": message, "page": page, "original": original, "terms": terms}
    return render(request, "sessions_app/message.html", {**context, "gone": blocks is None})


def _first_page_with(blocks: list[pages.Block], terms: list[str]) -> int:
    """The page (of ``PAGE_CHARS``) where one of ``terms`` first shows; 1 when none does."""
    position = 0
    for block in blocks:
        low = block.body.lower()
        found = [i for i in (low.find(t.lower()) for t in terms) if i >= 0]
        if found:
            return (position + min(found)) // pages.PAGE_CHARS + 1
        position += max(len(block.body), 1)
    return 1


@login_required
def message_detail(request: AuthenticatedHttpRequest, message_id: int) -> HttpResponse:
    message = message_for(request, message_id)
    return _message_page(request, message, pages.blocks_of(message.content), original=False)


@login_required
def message_original(request: AuthenticatedHttpRequest, message_id: int) -> HttpResponse:
    """What a compacted message said before: an excerpt in the timeline (htmx), else in full, paged."""
    message = message_for(request, message_id)
    blocks = pages.message_original(message)
    if not is_htmx(request):
        return _message_page(request, message, blocks, original=True)
    shown, hidden_blocks = pages.excerpt(blocks) if blocks is not None else (None, 0)
    context = {"session": message.session, "message": message, "blocks": shown, "hidden_blocks": hidden_blocks}
    return render(request, "sessions_app/_original.html", context)
