"""An exchange the upstream answered, recorded whole: what ``recording`` stores of it (the request's
messages, the reply, its usage as the exact count), then its ``ProviderRequest`` row (what it used and
cost). The row is written after the messages, in a transaction of its own: holding the recording's
locks until it is written would keep the next request of the conversation waiting, and a row that
can't be written must not cost the conversation its messages. An answer that reported no usage
(OpenAI's chat streams without ``stream_options.include_usage``) gets ctxweb's estimate in the row,
marked ``estimated``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from compaction.model_prices import TokenUsage
from compaction.tokens import calibrate
from sessions_app.models import AgentSession, Message
from sessions_app.selectors import usage
from sessions_app.services.provider_requests import Answered, provider_request_record
from sessions_app.services.provider_usage import Used
from sessions_app.services.proxy.recording import proxy_record_exchange


def proxy_record_answered(*, answered: Answered | None = None, **exchange: Any) -> AgentSession | None:
    """``proxy_record_exchange`` (``exchange``: its arguments), then the row of what the upstream
    answered (None: no answer came) in the session it recorded into."""
    session = proxy_record_exchange(**exchange)
    if session is not None and answered is not None:
        if 200 <= answered.status < 300 and not _reported(answered.used):
            answered = replace(answered, used=estimated_used(session), estimated=True)
        provider_request_record(session=session, answered=answered)  # a transaction of its own
    return session


def _reported(used: Used | None) -> bool:
    return used is not None and (used.tokens.total_input > 0 or used.tokens.output > 0)


def estimated_used(session: AgentSession) -> Used:
    """What an answer that reported no usage likely used: the session's context as STATUS estimates it
    (the request and the reply the recording stored), the reply's part as output."""
    total = usage.session_usage(session).used
    last = Message.objects.filter(session=session, seq=session.last_seq).values_list("role", "tokens").first()
    factor = usage.model_info(session.model).calibration
    output = calibrate(last[1], factor) if last is not None and last[0] == "assistant" else 0
    return Used(tokens=TokenUsage(input=max(0, total - output), output=min(output, total)))
