"""An exchange the upstream answered, recorded whole: what ``recording`` stores of it (the request's
messages, the reply, its usage as the exact count), then its ``ProviderRequest`` row (what it used and
cost). The row is written after the messages, in a transaction of its own: holding the recording's
locks until it is written would keep the next request of the conversation waiting, and a row that
can't be written must not cost the conversation its messages."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from sessions_app.models import AgentSession
from sessions_app.services.provider_requests import Answered, provider_request_record
from sessions_app.services.proxy.recording import proxy_record_exchange


def proxy_record_answered(*, answered: Answered | None = None, **exchange: Any) -> AgentSession | None:
    """``proxy_record_exchange`` (``exchange``: its arguments), then the row of what the upstream
    answered (None: no answer came) in the session it recorded into."""
    session = proxy_record_exchange(**exchange)
    if session is not None and answered is not None:
        with transaction.atomic():
            provider_request_record(session=session, answered=answered)
    return session
