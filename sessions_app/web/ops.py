"""The ops page: how the service itself is doing, for staff. Today: the exact-count cache, and a
button that clears it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from sessions_app.selectors import count_cache
from sessions_app.services.count_cache import exact_count_cache_clear
from sessions_app.web.access import AuthenticatedHttpRequest


def _staff_only(request: AuthenticatedHttpRequest) -> None:
    if not request.user.is_staff:
        raise Http404  # like every page that is not theirs: not even its existence


@login_required
def ops(request: AuthenticatedHttpRequest) -> HttpResponse:
    _staff_only(request)
    return render(request, "sessions_app/ops.html", {"cache": count_cache.exact_count_cache_stats()})


@login_required
@require_POST
def ops_cache_clear(request: AuthenticatedHttpRequest) -> HttpResponse:
    _staff_only(request)
    removed = exact_count_cache_clear()
    messages.success(request, f"Cleared the exact-count cache: {removed:,} entries removed, hits and misses reset.")
    return redirect("web:ops")
