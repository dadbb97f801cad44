"""The search page (``/search/?q=&project=&session=&page=``): what the user's sessions held, best hits
first, each linking to the page that shows it with the match highlighted (``selectors.search``)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

from sessions_app.errors import InvalidInput
from sessions_app.selectors.search import Scope, hit_path, search
from sessions_app.web.access import AuthenticatedHttpRequest, project_for, session_for

PAGE = 20


@login_required
def search_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    query = request.GET.get("q", "").strip()
    project = project_for(request, request.GET["project"]) if request.GET.get("project", "").isdigit() else None
    session = session_for(request, request.GET["session"]) if request.GET.get("session", "").isdigit() else None
    page = int(request.GET["page"]) if request.GET.get("page", "").isdigit() and int(request.GET["page"]) > 0 else 1
    hits, error = [], ""
    if query:
        scope = Scope(request.user, project.pk if project else None, session.pk if session else None)
        try:
            hits = search(scope, query, offset=(page - 1) * PAGE, limit=PAGE + 1)
        except InvalidInput as exc:
            error = exc.detail
    base = {
        k: v for k, v in {"q": query, "project": project and project.pk, "session": session and session.pk}.items() if v
    }
    context = {
        "query": query,
        "project": project or (session.project if session else None),
        "session": session,
        "hits": [(hit, hit_path(hit, query)) for hit in hits[:PAGE]],
        "start": (page - 1) * PAGE + 1,
        "error": error,
        "page": page,
        "next": f"?{urlencode({**base, 'page': page + 1})}" if len(hits) > PAGE else "",
        "previous": f"?{urlencode({**base, 'page': page - 1})}" if page > 1 else "",
    }
    return render(request, "sessions_app/search.html", context)
