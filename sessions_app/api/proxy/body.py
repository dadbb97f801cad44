"""A proxied request's body: read whole (a chunked one too, where the server can), and, for one too
large to record, the few top-level fields that say which conversation it belongs to (``model``,
``system``, ``metadata``, ``user``, the first few ``messages``), read without parsing the rest:
parsing a body makes Python objects several times its size, and such a body is forwarded, not
recorded. The scanner steps over every other value by its brackets and strings (C-speed regular
expressions on the bytes, no copies), within a budget of tokens, so a hostile body costs a bounded
amount of CPU too."""

from __future__ import annotations

import json
import re
from typing import Any

from django.conf import settings
from django.http import HttpRequest

FIELDS = ("model", "system", "metadata", "user")
FIRST_MESSAGES = 4  # an OpenAI request's system messages come first; its conversation starts after them
VALUE_MAX = 1024 * 1024  # a field larger than this is left out of the head
SCAN_BUDGET = 2_000_000  # strings and brackets stepped over before the scanner gives up

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_SCALAR = re.compile(rb"[^,}\]\s]+")
_SPACE = re.compile(rb"\s*")


class _Unreadable(Exception):
    pass


class Unread(Exception):
    """A body ctxweb does not read: the status and error type to refuse it with, and why."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status, self.error_type, self.message = status, error_type, message


def read(request: HttpRequest) -> bytes:
    """The request's body. A chunked one (no Content-Length) is read where the server has taken its
    chunks apart and says where it ends (``wsgi.input_terminated``: gunicorn); Django reads a body by
    its Content-Length, and would forward it empty. Elsewhere (runserver) it is refused (411)."""
    chunked = "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower()
    if not chunked or request.META.get("CONTENT_LENGTH"):
        return request.read()
    if not request.META.get("wsgi.input_terminated"):
        message = "ctxweb: send the body with a Content-Length header; this server does not read chunked bodies."
        raise Unread(411, "invalid_request_error", message)
    limit = settings.CTX_PROXY_MAX_BODY_BYTES
    raw: bytes = request.META["wsgi.input"].read(limit + 1)
    if len(raw) > limit:
        raise Unread(413, "request_too_large", f"ctxweb: the request is over {limit:,} bytes, the limit.")
    return raw


def head_of(raw: bytes) -> dict[str, Any] | None:
    """The request's head, or None when it is not a JSON object the scanner can read in its budget."""
    try:
        return _Scanner(raw).head()
    except (_Unreadable, ValueError, RecursionError, IndexError):
        return None


class _Scanner:
    def __init__(self, raw: bytes) -> None:
        self.raw, self.budget = raw, SCAN_BUDGET

    def head(self) -> dict[str, Any]:
        at = self._expect(0, b"{")
        found: dict[str, Any] = {}
        if self.raw[at : at + 1] == b"}":
            return found
        while True:
            key_end = self._end(at)
            key = json.loads(self.raw[at:key_end])
            at = self._expect(key_end, b":")
            end = self._end(at)
            if key in FIELDS and end - at <= VALUE_MAX:
                found[key] = json.loads(self.raw[at:end])
            elif key == "messages" and self.raw[at : at + 1] == b"[":
                found[key] = self._first(at, end)
            at = _SPACE.match(self.raw, end).end()  # type: ignore[union-attr]
            if self.raw[at : at + 1] == b"}":
                return found
            at = self._expect(at, b",")

    def _first(self, start: int, end: int) -> list[Any]:
        """The array's first few elements (each small enough to read)."""
        items: list[Any] = []
        at = _SPACE.match(self.raw, start + 1).end()  # type: ignore[union-attr]
        while len(items) < FIRST_MESSAGES and at < end - 1:
            item_end = self._end(at)
            if item_end - at > VALUE_MAX:
                break
            items.append(json.loads(self.raw[at:item_end]))
            at = _SPACE.match(self.raw, item_end).end()  # type: ignore[union-attr]
            if self.raw[at : at + 1] != b",":
                break
            at = _SPACE.match(self.raw, at + 1).end()  # type: ignore[union-attr]
        return items

    def _expect(self, at: int, what: bytes) -> int:
        at = _SPACE.match(self.raw, at).end()  # type: ignore[union-attr]
        if self.raw[at : at + 1] != what:
            raise _Unreadable
        return _SPACE.match(self.raw, at + 1).end()  # type: ignore[union-attr]

    def _end(self, at: int) -> int:
        """Where the JSON value that starts at ``at`` ends."""
        first = self.raw[at : at + 1]
        if first == b'"':
            string = _STRING.match(self.raw, at)
            if string is None:
                raise _Unreadable
            return string.end()
        if first not in (b"{", b"["):
            scalar = _SCALAR.match(self.raw, at)
            if scalar is None:
                raise _Unreadable
            return scalar.end()
        depth = 0
        for token in _TOKEN.finditer(self.raw, at):
            self.budget -= 1
            if self.budget < 0:
                raise _Unreadable
            char = self.raw[token.start()]
            if char in b"[{":
                depth += 1
            elif char in b"]}":
                depth -= 1
                if depth == 0:
                    return token.end()
        raise _Unreadable
