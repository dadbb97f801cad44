"""The proxy's bases answer a client's probe; other paths under them answer in the dialect's shape."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("dialect", ["anthropic", "openai"])
@pytest.mark.parametrize("slash", ["", "/"])
def test_head_and_get_on_the_base_answer_200_without_a_key(client, dialect, slash):
    head = client.head(f"/proxy/{dialect}{slash}")
    got = client.get(f"/proxy/{dialect}{slash}")
    assert head.status_code == got.status_code == 200
    assert got.json()["proxy"] == dialect
    assert got.json()["base_url"].endswith(f"/proxy/{dialect}")
    assert all(f.startswith("POST /v1/") for f in got.json()["forwards"])


def test_a_post_to_the_base_is_refused_in_anthropics_shape(client):
    response = client.post("/proxy/anthropic/", data=b"{}", content_type="application/json")
    assert response.status_code == 405
    assert response.json()["type"] == "error" and response.json()["error"]["type"] == "invalid_request_error"
    assert "POST" not in response["Allow"]


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/proxy/anthropic/v1/models", lambda body: body["error"]["type"] == "not_found_error"),
        ("/proxy/anthropic/v1/messages/batches", lambda body: body["type"] == "error"),
        ("/proxy/openai/v1/responses/x", lambda body: body["error"]["code"] == "not_found_error"),
    ],
)
def test_a_path_not_forwarded_is_the_dialects_404(client, path, shape):
    response = client.get(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert shape(response.json())
