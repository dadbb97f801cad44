"""The API docs group operations by resource: every operation has a tag of its own resource (not
the URL's "v1"), and every tag used is described, in the order the docs show them."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db

OPERATIONS = ("get", "post", "put", "patch", "delete")


@pytest.fixture
def schema(client) -> dict:
    response = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return response.json()


def _tags(schema: dict) -> dict[str, list[str]]:
    return {
        f"{method.upper()} {path}": op.get("tags", [])
        for path, item in schema["paths"].items()
        for method, op in item.items()
        if method in OPERATIONS
    }


def test_every_operation_has_a_resource_tag_and_every_tag_is_described(schema):
    tags = _tags(schema)
    assert len(tags) > 30
    assert {op: t for op, t in tags.items() if not t or "v1" in t} == {}
    described = {tag["name"]: tag.get("description", "") for tag in schema.get("tags", [])}
    used = {t for ts in tags.values() for t in ts}
    assert used <= set(described), used - set(described)
    assert all(described[t].strip() for t in used)
    assert set(described) <= used, "a described tag no operation has"


def test_operations_land_under_their_resource(schema):
    tags = _tags(schema)
    assert tags["POST /api/v1/sessions/{session_id}/messages/"] == ["messages"]
    assert tags["GET /api/v1/compactions/{compaction_id}/"] == ["compactions"]
    assert tags["POST /api/v1/sessions/{session_id}/compactions/"] == ["compactions"]
    assert tags["PATCH /api/v1/projects/{project_id}/policy/"] == ["policy"]
    assert tags["POST /api/v1/projects/{project_id}/webhooks/"] == ["webhooks"]
    assert tags["PATCH /api/v1/projects/{project_id}/budgets/{budget_id}/"] == ["spend"]
    assert tags["POST /api/v1/count_tokens/"] == ["tokens"]
    assert tags["GET /api/v1/sessions/{session_id}/status/"] == ["sessions"]
    assert tags["POST /api/v1/sessions/import/"] == ["import"]
    assert [t["name"] for t in schema["tags"]][:3] == ["projects", "sessions", "messages"]
