"""The proxy's services, one per step of an exchange: the session it belongs to (``sessions``), what
goes upstream (``upstream``), what is recorded (``recording``: the request's new messages, the reply
and its usage; ``exchanges``: that with the exchange's ``ProviderRequest`` row, in one transaction),
and what could not be (``gaps``: requests forwarded while the database was down; ``oversized``:
requests too large to record). ``identity`` says which conversation a request is and
what of it is the conversation; ``messages``, what an exchange's messages are. The interface is
``api/proxy/``."""

from sessions_app.services.proxy.exchanges import proxy_record_answered
from sessions_app.services.proxy.recording import (
    BASE,
    Recorded,
    proxy_continued,
    proxy_record_exchange,
    proxy_record_request,
)
from sessions_app.services.proxy.sessions import SIDECHAIN_OF, long_context_beta, proxy_session, proxy_session_for

__all__ = [
    "BASE",
    "SIDECHAIN_OF",
    "Recorded",
    "long_context_beta",
    "proxy_continued",
    "proxy_record_answered",
    "proxy_record_exchange",
    "proxy_record_request",
    "proxy_session",
    "proxy_session_for",
]
