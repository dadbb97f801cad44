"""What every page's header needs: the signed-in user's projects, for the project switcher."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from sessions_app.selectors import access


def projects(request: HttpRequest) -> dict[str, Any]:
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    return {"switcher_projects": access.project_list_for(request.user)[:50]}
