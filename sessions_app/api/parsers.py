"""Request bodies: JSON that ctxweb can store and read back, or a clear 400 before anything is written.

DRF's own parser lets through what breaks later: a lone UTF-16 surrogate (``"\\ud83d"``) that no
UTF-8 database takes, nesting so deep that parsing overflows the stack (a 500), or that later
rendering does. Here both are refused with ``{"detail", "code"}`` (``invalid_unicode``,
``too_deep``, ``parse_error``), whatever endpoint the body is for.
"""

from __future__ import annotations

from collections import Counter
from typing import IO, Any

from django.conf import settings
from rest_framework import parsers
from rest_framework.exceptions import ParseError

from compaction import jsonvalues
from sessions_app.errors import InvalidInput


class JSONParser(parsers.JSONParser):
    def parse(self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None) -> Any:
        encoding = (parser_context or {}).get("encoding", settings.DEFAULT_CHARSET)
        try:
            value = jsonvalues.loads(stream.read().decode(encoding))
        except ValueError as exc:  # UnicodeDecodeError is a ValueError too
            raise ParseError(f"JSON parse error - {exc}") from None
        return self.checked(value)

    def checked(self, value: Any) -> Any:
        found = jsonvalues.problem(value)
        if found is not None:
            code, detail = found
            raise InvalidInput(detail.replace("the value", "the body", 1) + ".", code=code)
        return value


class CleaningJSONParser(JSONParser):
    """For bodies that carry recorded text (a transcript's lines): a lone surrogate there is cleaned
    to U+FFFD rather than refused, because the program uploading it can't fix the file it read."""

    def checked(self, value: Any) -> Any:
        return super().checked(jsonvalues.clean(value, Counter()))
