"""The OpenAI proxy's answers on the wire, from a hostile review: a compressed whole answer reaches the caller
readable; an upstream error passes through unchanged."""

from __future__ import annotations

import gzip
import json
from typing import Any

import pytest

from tests.proxy.raw_upstream import Raw, completion, post

pytestmark = pytest.mark.django_db


@pytest.fixture
def raw(settings: Any) -> Any:
    settings.CTX_PROXY_RECORDERS = 0
    with Raw() as server:
        settings.CTX_PROXY_OPENAI_URL = server.base_url
        yield server


def test_gzip_answer_passes_through_readable(team, raw, client):
    # ctxweb asks for identity; an upstream (or a relay before it) that compresses anyway.
    body = json.dumps(completion("zipped", usage={"prompt_tokens": 3, "completion_tokens": 1})).encode()
    raw.queue.append((200, "application/json|content-encoding: gzip", [gzip.compress(body)]))
    _status, answer, response = post(
        client, team.bob.key, {"model": "gpt-4o", "messages": [{"role": "user", "content": "z"}]}
    )
    enc = response.headers.get("content-encoding")
    # What the caller gets must decode as the headers say.
    data = gzip.decompress(answer) if enc == "gzip" else answer
    assert json.loads(data)["choices"][0]["message"]["content"] == "zipped"


def test_error_passes_through_unchanged(team, raw, client):
    err = {"error": {"message": "bad thing", "type": "invalid_request_error", "param": "messages", "code": "x"}}
    raw.json(err, status=400)
    status, answer, _response = post(
        client, team.bob.key, {"model": "gpt-4o", "messages": [{"role": "user", "content": "e"}]}
    )
    assert status == 400 and json.loads(answer) == err
