"""OpenAPI: every operation also documents the errors it can answer, each with the ERROR body
``{"detail", "code"}`` (see errors.py). The fuzzing test (tests/api/test_schemathesis.py) holds the
service to it: an answer with an undocumented status code fails there. Operations are grouped by
resource (``RESOURCE_TAGS``); the tags' order and descriptions are SPECTACULAR_SETTINGS["TAGS"]."""

from __future__ import annotations

import re
from typing import Any

import uritemplate
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.utils import Direction, OpenApiResponse

from sessions_app.api.serializers import ErrorOut

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}

ERRORS = {
    "400": "Bad input: a malformed body, parameter or value (`code` says which rule)",
    "401": "No credentials, or an invalid or revoked API key",
    "403": "Your role in the project does not allow this (or a browser request without its CSRF token)",
    "404": "No such object among your projects' (objects of other projects answer 404 too), or no such page",
    "409": "The object's state does not allow this now (a closed session, a compaction already running, "
    "a compaction no longer revertible)",
    "413": "The body is larger than the limit",
    "429": "Too many requests; retry after `Retry-After` seconds",
}


# The resource an operation belongs to, by its path under /api/v1/: the first pattern that matches.
# (drf-spectacular's default is the path's first segment, "v1" for every operation.)
RESOURCE_TAGS = [
    (r"sessions/[^/]+/messages/", "messages"),
    (r"(sessions/[^/]+/)?compactions/", "compactions"),
    (r"(sessions/[^/]+/)?checkpoints/", "checkpoints"),
    (r"sessions/[^/]+/handoff/|handoffs/", "handoffs"),
    (r"sessions/(import|transcript)/", "import"),
    (r"sessions/[^/]+/history/|projects/[^/]+/dashboard/", "history"),
    (r"sessions/[^/]+/(requests|spend|tools)/|projects/[^/]+/(spend|budgets|requests)/", "spend"),
    (r"projects/[^/]+/policy/", "policy"),
    (r"(projects/[^/]+/)?webhooks/", "webhooks"),
    (r"count_tokens/|models/", "tokens"),
    (r"search/", "search"),
    (r"projects/", "projects"),
    (r"sessions/", "sessions"),
]


def resource_tag(path: str) -> str | None:
    relative = path.removeprefix("/api/v1/")
    return next((tag for pattern, tag in RESOURCE_TAGS if re.match(pattern, relative)), None)


def error_response(status: str) -> OpenApiResponse:
    return OpenApiResponse(response=ErrorOut, description=ERRORS[status])


class AutoSchema(SpectacularAutoSchema):
    """Adds the error answers an operation can give, unless its ``extend_schema`` documents them:

    - 400 and 401 everywhere (every endpoint reads input; every endpoint needs a key or a session);
    - 404 where the path names an object, and on paginated lists (a page past the end);
    - 403, 409 and 413 on writes (role, state, body size);
    - 429 where a rate limit applies.
    """

    def get_tags(self) -> list[str]:
        tag = resource_tag(self.path)
        return [tag] if tag else super().get_tags()

    def error_statuses(self) -> list[str]:
        statuses = ["400", "401"]
        names_object = bool(uritemplate.variables(self.path))
        if self.method in UNSAFE:
            statuses.append("403")
        if names_object or (self.method == "GET" and self._get_paginator() is not None and self._is_list_view()):
            statuses.append("404")
        if self.method in UNSAFE:
            if names_object:
                statuses.append("409")
            statuses.append("413")
        if self.view.get_throttles():
            statuses.append("429")
        return statuses

    def _get_response_bodies(self, direction: Direction = "response") -> dict[str, Any]:
        responses = super()._get_response_bodies(direction)
        if direction != "response":
            return responses
        for status in self.error_statuses():
            if status not in responses:
                responses[status] = self._get_response_for_code(error_response(status), status, direction=direction)
        return responses
