"""An exchange the upstream answered, recorded whole: what ``recording`` stores of it (the request's
messages, the reply, its usage as the exact count) and its ``ProviderRequest`` row (what it used and
cost), in one transaction, so neither is ever stored without the other."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from sessions_app.models import AgentSession
from sessions_app.services.provider_requests import Answered, provider_request_record
from sessions_app.services.proxy.recording import proxy_record_exchange


def proxy_record_answered(*, answered: Answered | None = None, **exchange: Any) -> AgentSession | None:
    """``proxy_record_exchange`` (``exchange``: its arguments), then the row of what the upstream
    answered (None: no answer came) in the session it recorded into."""
    with transaction.atomic():
        session = proxy_record_exchange(**exchange)
        if session is not None and answered is not None:
            provider_request_record(session=session, answered=answered)
    return session
