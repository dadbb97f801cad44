"""Who is asking the proxy, and where: the caller's ctxweb key (``ctxweb-api-key``), the project the
request records in, whether the caller may write there, and the project's own upstream key for a
request that brings none. Each answers a refusal in the API's own words, or nothing when ctxweb's
database can't tell (the request is then forwarded, unrecorded)."""

from __future__ import annotations

import logging
import math
from typing import Any

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from sessions_app.api.proxy import headers as proxy_headers
from sessions_app.api.proxy.dialects import Dialect, error_type
from sessions_app.api.proxy.headers import KEY_HEADER, PROJECT_HEADER
from sessions_app.errors import ServiceError
from sessions_app.models import ApiKey, Project, Role
from sessions_app.selectors import access, budgets
from sessions_app.services import keys, projects

log = logging.getLogger(__name__)


def project_of(request: HttpRequest, user: Any) -> Project:
    """The project the request records in (the ``ctxweb-project`` header, else the user's only one),
    where the user may write; looked up once a request (its key and its session both need it)."""
    found: Project | None = getattr(request, "_ctxweb_project", None)
    if found is None:
        ref = request.headers.get(PROJECT_HEADER, "").strip() or None
        found = access.project_find_for(user, ref, min_role=Role.MEMBER)
        request._ctxweb_project = found  # type: ignore[attr-defined]
    return found


def member_refusal(request: HttpRequest, user: Any, dialect: Dialect) -> HttpResponse | None:
    """A refusal unless the user is a member or an admin of the request's project; None too when
    ctxweb's database can't tell (the request goes unrecorded, as when the key can't be checked)."""
    try:
        project_of(request, user)
    except ServiceError as exc:
        return dialect.refuse(exc.status, error_type(exc.status), exc.detail)
    except DatabaseError as exc:
        log.warning("proxy: the project could not be looked up, forwarding unrecorded: %s", type(exc).__name__)
    return None


def budget_refusal(request: HttpRequest, caller_key: ApiKey, dialect: Dialect) -> HttpResponse | None:
    """A 429 when a refusing budget covering the caller's project or key reached its limit this
    period (one indexed query; the sum only when one did), with ``retry-after`` the seconds to its
    reset; None when none did, or when ctxweb's database can't tell (the request is forwarded)."""
    try:
        state = budgets.refusing_budget(project_of(request, caller_key.user), caller_key.pk)
    except (ServiceError, DatabaseError):  # answered where the project is looked up / forwarded
        return None
    if state is None:
        return None
    message = (
        f"ctxweb budget exceeded: {state.label}: ${state.spent_usd:,.2f} spent since "
        f"{state.period_start.isoformat()} 00:00 UTC; resets at {state.resets_at:%Y-%m-%d %H:%M} UTC."
    )
    response = dialect.rate_limited(message)
    response["retry-after"] = str(max(1, math.ceil((state.resets_at - timezone.now()).total_seconds())))
    return response


def project_key(request: HttpRequest, user: Any, dialect: Dialect) -> tuple[str | None, HttpResponse | None]:
    """For a request without a key of its own: the Anthropic key its project's admins set (a
    member's request may use it), or a refusal saying there is none; (None, None) when ctxweb's
    database can't tell (the request goes as it came, and the upstream answers)."""
    if not dialect.project_key:
        message = f"ctxweb: send your own API key ({dialect.own_key_header}); ctxweb keeps none for this API."
        return None, dialect.refuse(401, "authentication_error", message)
    try:
        key = projects.project_upstream_key(project_of(request, user))
    except ServiceError as exc:
        return None, dialect.refuse(exc.status, error_type(exc.status), exc.detail)
    except DatabaseError:
        return None, None
    if key is None:
        message = (
            "ctxweb: no Anthropic API key: send yours in the x-api-key header, or ask the project's admins "
            "to set one in its settings."
        )
        return None, dialect.refuse(401, "authentication_error", message)
    return key, None


def caller(request: HttpRequest, dialect: Dialect) -> tuple[ApiKey | None, HttpResponse | None]:
    """The ctxweb key of the request (its user is the caller); a refusal when the key is missing or
    wrong; (None, None) when the database can't tell (the request is then forwarded, unrecorded)."""
    raw = proxy_headers.ctxweb_key(request)
    if not raw:
        message = (
            f"ctxweb: send your ctxweb API key in the {KEY_HEADER} header (your own goes in {dialect.own_key_header})"
        )
        if dialect.project_key:
            message += ", or in x-api-key itself when the project's admins set its Anthropic key"
        return None, dialect.refuse(401, "authentication_error", message + ".")
    try:
        key = keys.apikey_authenticate(raw)
    except DatabaseError as exc:
        log.warning("proxy: the key could not be checked, forwarding unrecorded: %s", type(exc).__name__)
        return None, None
    if key is None:
        return None, dialect.refuse(401, "authentication_error", f"ctxweb: the {KEY_HEADER} is invalid or revoked.")
    return key, None
