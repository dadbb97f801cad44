"""What a page may show: the selectors' access rules, as pages answer them. ``NotFound`` (also what
anything outside the user's projects is) becomes a 404 page, ``Forbidden`` (a member whose role
doesn't allow the action) a 403."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest

from sessions_app.errors import Forbidden, NotFound
from sessions_app.models import AgentSession, ApiKey, Compaction, Message, Project, Role, Webhook
from sessions_app.selectors import access

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

T = TypeVar("T")


class AuthenticatedHttpRequest(HttpRequest):
    """What a ``login_required`` view is given (django-stubs' way to say so): the user is signed in,
    never ``AnonymousUser``. For annotations only: Django makes the request."""

    user: User


def as_page(lookup: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``lookup(*args, **kwargs)``, with access errors turned into Django's 404 and 403."""
    try:
        return lookup(*args, **kwargs)
    except NotFound as exc:
        raise Http404(exc.detail) from None
    except Forbidden as exc:
        raise PermissionDenied(exc.detail) from None


def project_for(request: AuthenticatedHttpRequest, project_id: Any, *, min_role: Role = Role.VIEWER) -> Project:
    return as_page(access.project_get_for, request.user, project_id, min_role=min_role)


def session_for(request: AuthenticatedHttpRequest, session_id: Any, *, min_role: Role = Role.VIEWER) -> AgentSession:
    return as_page(access.session_get_for, request.user, session_id, min_role=min_role)


def compaction_for(
    request: AuthenticatedHttpRequest, compaction_id: Any, *, min_role: Role = Role.VIEWER
) -> Compaction:
    return as_page(access.compaction_get_for, request.user, compaction_id, min_role=min_role)


def message_for(request: AuthenticatedHttpRequest, message_id: Any) -> Message:
    return as_page(access.message_get_for, request.user, message_id)


def member_for(project: Project, user_id: Any) -> User:
    return as_page(access.member_get, project, user_id)


def apikey_for(request: AuthenticatedHttpRequest, key_id: Any) -> ApiKey:
    return as_page(access.apikey_get_for, request.user, key_id)


def webhook_for(request: AuthenticatedHttpRequest, webhook_id: Any) -> Webhook:
    return as_page(access.webhook_get_for, request.user, webhook_id)
