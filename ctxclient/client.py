"""A small client for ctxweb's REST API (``/api/v1/``), standard library only (urllib).

Every method returns the decoded JSON answer. An answer with an error status raises ``ApiError``
(``status``, ``code``, ``detail``, ``data``: the whole body); a server that can't be reached at all
(refused, unresolvable, timed out, or a proxy answering 502/503/504) raises ``Unreachable``. Both are
``CtxError``s. Each request is sent once unless the client was given a ``Retry`` (see ``retry.py``).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, cast

from compaction.status import Status

from . import deadline
from .errors import ApiError, CtxError, DeadlineExceeded, Unreachable
from .retry import Retry, retry_after_seconds

# A handed-off session names its continuation; following more than this many in one call means a loop.
MAX_CONTINUATIONS = 10

if TYPE_CHECKING:  # aliases for annotations only: the client runs on Python 3.8 too (macOS's python3)
    from typing import TypeAlias

    SessionRef: TypeAlias = int | str  # a session's id, or its external id (the agent's own session id)
    JSON: TypeAlias = dict[str, Any]

__all__ = ["ApiError", "Client", "CtxError", "DeadlineExceeded", "Retry", "Status", "Unreachable"]

Level = Literal["compact", "summarize", "handoff"]


class Client:
    """``Client("http://127.0.0.1:8000", "ctx_…")``, or ``Client.from_env()`` (``CTX_URL``, ``CTX_API_KEY``)."""

    def __init__(self, url: str, api_key: str, *, timeout: float = 10.0, retry: Retry | None = None) -> None:
        base = url.rstrip("/")
        if not base.endswith("/api/v1"):
            base += "/api/v1"
        if not 0 < timeout < float("inf"):  # NaN included
            raise ValueError(f"timeout is a positive number of seconds, not {timeout!r}")
        self.base = base
        self.api_key = api_key
        self.timeout = timeout
        self.retry = retry

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, retry: Retry | None = None) -> Client:
        env = os.environ if environ is None else environ
        return cls(env["CTX_URL"], env["CTX_API_KEY"], timeout=float(env.get("CTX_TIMEOUT") or 10), retry=retry)

    # ------------------------------------------------------------------ HTTP

    def request(self, method: str, path: str, body: Any = None, *, query: Mapping[str, Any] | None = None) -> Any:
        """One call: ``path`` below ``/api/v1/`` (``"sessions/3/status/"``); the decoded JSON answer."""
        url = f"{self.base}/{path.lstrip('/')}"
        if query:
            params = {
                k: ("true" if v is True else "false" if v is False else v) for k, v in query.items() if v is not None
            }
            url += "?" + urllib.parse.urlencode(params)
        headers = {"Authorization": f"Bearer {self.api_key}", "Accept": "application/json", "User-Agent": "ctxclient/1"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        if self.retry is None:
            return self._send(req, self.timeout)
        return self._send_retrying(req, self.retry, f"{method} {path}")

    def _send_retrying(self, req: urllib.request.Request, retry: Retry, what: str) -> Any:
        attempt = 0
        while True:
            left = retry.left()
            if left < retry.min_attempt:
                raise DeadlineExceeded(f"ctxweb: no time left to send {what} (the retry budget is spent)")
            try:
                # Each attempt's timeout bounds it as a whole, so no attempt outlives the budget.
                return self._send(req, min(self.timeout, left))
            except CtxError as exc:
                if not retry.retries(exc):
                    raise
                wait, left = retry.wait(exc, attempt), retry.left()
                if wait + retry.min_attempt > left:
                    asked = "the server asked for" if exc.retry_after else "backing off"
                    retry.note(
                        f"giving up on {what} after {attempt + 1} attempt(s): {exc} "
                        f"({asked} {wait:.1f} s, {max(left, 0):.1f} s of the budget left)"
                    )
                    raise
                retry.note(f"{what}: {exc}; retry {attempt + 1} in {wait:.1f} s")
                time.sleep(wait)
                attempt += 1

    def _send(self, req: urllib.request.Request, timeout: float) -> Any:
        try:
            # ``timeout`` is the whole request's: connect, send, and the complete answer.
            with deadline.opener(timeout).open(req, timeout=timeout) as response:
                raw = response.read()
                kind = response.headers.get_content_type()
        except urllib.error.HTTPError as exc:
            raise _api_error(exc) from None
        # socket.timeout: a read timing out on Python < 3.10, where it isn't yet TimeoutError.
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError, socket.timeout) as exc:  # noqa: UP041
            reason = getattr(exc, "reason", exc)
            raise Unreachable(f"ctxweb at {self.base} can't be reached: {reason}") from None
        if not raw:
            return None
        if kind != "application/json":
            return raw.decode("utf-8", errors="replace")
        return json.loads(raw)

    def _call(self, method: str, path: str, body: Any = None, *, query: Mapping[str, Any] | None = None) -> JSON:
        """``request`` for the endpoints that answer with a JSON object (every one but the handoff download)."""
        return cast("JSON", self.request(method, path, body, query=query))

    def _pages(self, path: str, query: Mapping[str, Any] | None = None) -> list[JSON]:
        rows: list[JSON] = []
        page = 1
        while True:
            answer = self.request("GET", path, query={**(query or {}), "page": page, "page_size": 1000})
            rows.extend(answer["results"])
            if not answer.get("next"):
                return rows
            page += 1

    # ------------------------------------------------------------------ projects

    def projects(self) -> list[JSON]:
        return self._pages("projects/")

    def project_create(self, name: str, *, description: str = "") -> JSON:
        return self._call("POST", "projects/", {"name": name, "description": description})

    def project_id(self, project: int | str) -> int:
        """A project's id from its id or its name (one of yours)."""
        text = str(project)
        if isinstance(project, int) or (text.isascii() and text.isdigit()):  # "²" and "٣" are names
            return int(project)
        matches: list[int] = [p["id"] for p in self.projects() if p["name"] == project]
        if len(matches) != 1:
            detail = (
                f"No project named {project!r} among yours." if not matches else f"Several projects are {project!r}."
            )
            raise ApiError(404, "not_found", detail)
        return matches[0]

    # ------------------------------------------------------------------ sessions

    def session_create(
        self,
        project: int | str,
        *,
        name: str = "",
        model: str | None = None,
        system_prompt: str = "",
        tools: Sequence[Mapping[str, Any]] | None = None,
        external_id: str = "",
        context_window: int | None = None,
        auto_compact: bool | None = None,
    ) -> JSON:
        body: JSON = {
            "project": self.project_id(project),
            "name": name,
            "system_prompt": system_prompt,
            "tools": list(tools or []),
            "external_id": external_id,
            "context_window": context_window,
            "auto_compact": auto_compact,
        }
        if model:
            body["model"] = model
        return self._call("POST", "sessions/", body)

    def session(self, session: SessionRef) -> JSON:
        return self._call("GET", f"sessions/{_ref(session)}/")

    def session_update(self, session: SessionRef, **changes: Any) -> JSON:
        return self._call("PATCH", f"sessions/{_ref(session)}/", changes)

    def session_find(self, project: int | str, external_id: str) -> JSON | None:
        """The session with this external id in the project, or None."""
        rows = self._pages("sessions/", {"project": self.project_id(project), "q": external_id})
        return next((row for row in rows if row["external_id"] == external_id), None)

    def session_for(self, project: int | str, external_id: str, **create: Any) -> JSON:
        """The session with this external id in the project, created (with ``create``'s fields) if there is none."""
        found = self.session_find(project, external_id)
        if found is not None:
            return found
        try:
            return self.session_create(project, external_id=external_id, **create)
        except ApiError as exc:
            if exc.code != "duplicate_external_id":
                raise
            found = self.session_find(project, external_id)  # someone else made it a moment ago
            if found is None:
                raise
            return found

    # ------------------------------------------------------------------ messages and status

    def append(
        self, session: SessionRef, messages: Mapping[str, Any] | Sequence[Mapping[str, Any]], *, follow: bool = True
    ) -> JSON:
        """One message or a list; ``{"session": id, "messages": [...], "status": STATUS}``. A ``client_id``
        makes a retry safe. A session handed off into a fresh one (the policy's auto-continue) answers
        409 ``session_closed`` naming ``continued_in``: with ``follow`` the messages go there instead,
        and the answer's ``session`` says where they landed."""
        body = dict(messages) if isinstance(messages, Mapping) else [dict(m) for m in messages]
        target: SessionRef = session
        for _ in range(MAX_CONTINUATIONS):
            try:
                return self._call("POST", f"sessions/{_ref(target)}/messages/", body)
            except ApiError as exc:
                following = exc.data.get("continued_in")
                if not follow or exc.code != "session_closed" or not isinstance(following, int):
                    raise
                target = following
        raise CtxError(f"Session {session} was continued more than {MAX_CONTINUATIONS} times in a row.")

    def messages(
        self, session: SessionRef, *, state: str = "active", after_seq: int | None = None, limit: int = 100
    ) -> JSON:
        return self._call(
            "GET", f"sessions/{_ref(session)}/messages/", query={"state": state, "after_seq": after_seq, "limit": limit}
        )

    def status(self, session: SessionRef) -> Status:
        return cast("Status", self.request("GET", f"sessions/{_ref(session)}/status/"))

    def context(self, session: SessionRef, *, format: Literal["anthropic", "openai"] = "anthropic") -> JSON:
        """The model-ready request: ``system``, ``tools``, ``messages`` and STATUS."""
        return self._call("GET", f"sessions/{_ref(session)}/context/", query={"format": format})

    def count(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        model: str = "claude-sonnet-4-5",
        system: str | Sequence[Mapping[str, Any]] | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> JSON:
        """``{"input_tokens": N, "source": "exact"|"estimate"}`` for an Anthropic count_tokens body."""
        body: JSON = {"model": model, "messages": [dict(m) for m in messages]}
        if system is not None:
            body["system"] = system if isinstance(system, str) else [dict(b) for b in system]
        if tools is not None:
            body["tools"] = [dict(t) for t in tools]
        return self._call("POST", "count_tokens/", body)

    # ------------------------------------------------------------------ compaction

    def compact(
        self, session: SessionRef, *, level: Level = "compact", dry_run: bool = False, instructions: str = ""
    ) -> JSON:
        """Queues a compaction (COMPACTION, status ``queued``, or done already in the embedded mode), or
        previews it with ``dry_run``."""
        body = {"level": level, "dry_run": dry_run, "instructions": instructions}
        return self._call("POST", f"sessions/{_ref(session)}/compactions/", body)

    def compaction(self, compaction: int) -> JSON:
        return self._call("GET", f"compactions/{int(compaction)}/")

    def revert(self, compaction: int) -> JSON:
        return self._call("POST", f"compactions/{int(compaction)}/revert/")

    def handoff(self, session: SessionRef, *, continue_: bool = False) -> JSON:
        """Writes the handoff document (HANDOFF); with ``continue_`` also starts the continuation session."""
        return self._call("POST", f"sessions/{_ref(session)}/handoff/", {"continue": continue_})

    def handoff_download(self, handoff: int, *, format: Literal["txt", "md", "json"] = "txt") -> str:
        answer = self.request("GET", f"handoffs/{int(handoff)}/download/", query={"format": format})
        return answer if isinstance(answer, str) else json.dumps(answer, indent=2)

    # ------------------------------------------------------------------ transcripts

    def upload_transcript(
        self,
        project: int | str,
        external_id: str,
        lines: str,
        *,
        offset: int,
        final: bool = False,
        name: str = "",
        format: Literal["claude-code"] = "claude-code",
    ) -> JSON:
        """Send the complete JSONL lines a transcript gained, starting at byte ``offset``. The answer carries
        the server's ``offset`` (where the next upload starts) and STATUS; a gap raises ``ApiError`` 409 with
        ``data["expected_offset"]``."""
        body = {
            "project": str(project),
            "external_id": external_id,
            "format": format,
            "offset": offset,
            "lines": lines,
            "final": final,
            "name": name,
        }
        return self._call("POST", "sessions/transcript/", body)


def _ref(session: SessionRef) -> str:
    return urllib.parse.quote(str(session), safe="")


def _api_error(exc: urllib.error.HTTPError) -> CtxError:
    try:
        raw = exc.read()
    except (OSError, http.client.HTTPException):
        raw = b""
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    retry_after = retry_after_seconds(exc.headers)
    if exc.code in (502, 503, 504) and "code" not in data:
        return Unreachable(
            f"ctxweb is not answering (HTTP {exc.code} from {exc.url})", status=exc.code, retry_after=retry_after
        )
    code = str(data.get("code") or "error")
    detail = str(data.get("detail") or exc.reason or f"HTTP {exc.code}")
    return ApiError(exc.code, code, detail, data, retry_after=retry_after)
