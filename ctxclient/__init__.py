"""ctxclient: a small, typed client for ctxweb's REST API, standard library only.

Usage::

    from ctxclient import Client

    ctx = Client.from_env()  # CTX_URL, CTX_API_KEY
    session = ctx.session_for("my project", "run-42", name="fix the build")
    answer = ctx.append(session["id"], {"role": "user", "content": "The build fails", "client_id": "m1"})
    print(answer["status"]["usage_percent"], answer["status"]["level"])

    # Retry 429 and 5xx (honouring Retry-After) and lost connections, all within 8 seconds:
    ctx = Client.from_env(retry=Retry.within(8))
"""

from .client import Client, Status
from .errors import ApiError, CtxError, DeadlineExceeded, Unreachable
from .retry import Retry

__all__ = ["ApiError", "Client", "CtxError", "DeadlineExceeded", "Retry", "Status", "Unreachable"]
