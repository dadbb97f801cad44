"""The ops page: how the service itself is doing, for staff. Today: the exact-count cache."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render

from sessions_app.selectors import count_cache
from sessions_app.web.access import AuthenticatedHttpRequest


@login_required
def ops(request: AuthenticatedHttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise Http404  # like every page that is not theirs: not even its existence
    return render(request, "sessions_app/ops.html", {"cache": count_cache.exact_count_cache_stats()})
