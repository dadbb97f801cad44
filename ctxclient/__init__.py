"""ctxclient: a small, typed client for ctxweb's REST API, standard library only.

Usage::

    from ctxclient import Client

    ctx = Client.from_env()  # CTX_URL, CTX_API_KEY
    session = ctx.session_for("my project", "run-42", name="fix the build")
    answer = ctx.append(session["id"], {"role": "user", "content": "The build fails", "client_id": "m1"})
    print(answer["status"]["usage_percent"], answer["status"]["level"])
"""

from .client import ApiError, Client, CtxError, Status, Unreachable

__all__ = ["ApiError", "Client", "CtxError", "Status", "Unreachable"]
