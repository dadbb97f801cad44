"""Every API view reads JSON with the project's parser (``api/parsers.py``), which answers a body
nested past what Python reads, or holding what storage can't hold, with a 400 — never DRF's own,
which let a RecursionError out as a 500 (found on the webhook endpoints)."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework import parsers
from rest_framework.views import APIView

from sessions_app.api.parsers import JSONParser


def _views(patterns: list) -> list[type[APIView]]:
    found = []
    for entry in patterns:
        if isinstance(entry, URLResolver):
            found += _views(entry.url_patterns)
        elif isinstance(entry, URLPattern):
            view = getattr(entry.callback, "cls", None)
            if isinstance(view, type) and issubclass(view, APIView):
                found.append(view)
    return found


def test_no_api_view_parses_json_with_drfs_own_parser():
    views = _views(get_resolver().url_patterns)
    assert len(views) > 20
    plain = {
        view.__name__
        for view in views
        for parser in view.parser_classes
        if issubclass(parser, parsers.JSONParser) and not issubclass(parser, JSONParser)
    }
    assert plain == set()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "path"),
    [("post", "/api/v1/projects/{project}/webhooks/"), ("patch", "/api/v1/projects/{project}/policy/")],
)
def test_a_body_nested_past_what_python_reads_is_a_400(team, api_as, method, path):
    deep = "[" * 3000 + "]" * 3000
    answer = getattr(api_as(team.alice), method)(path.format(project=team.project.pk), deep)
    assert answer.status_code == 400, answer.content
    assert answer.json()["code"]
