"""STATUS has one definition (``compaction.status.Status``): the OpenAPI schema documents exactly it,
key by key and type by type, and ctxclient's ``Status`` is that very type."""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin, get_type_hints, is_typeddict

import pytest
from drf_spectacular.generators import SchemaGenerator

import ctxclient
from compaction.status import Status

JSON_TYPES = {int: "integer", float: "number", str: "string", bool: "boolean"}


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node or ("allOf" in node and len(node["allOf"]) == 1):
        node = node["allOf"][0] if "allOf" in node else node
        if "$ref" in node:
            node = schema["components"]["schemas"][node["$ref"].rsplit("/", 1)[-1]]
    return node


def _agrees(schema: dict[str, Any], node: dict[str, Any], hint: Any, where: str) -> None:
    node = _resolve(schema, node)
    if hint in JSON_TYPES:
        assert node.get("type") == JSON_TYPES[hint], where
        assert not node.get("nullable"), where
    elif type(None) in get_args(hint):
        (inner,) = (a for a in get_args(hint) if a is not type(None))
        assert node.get("type") == JSON_TYPES[inner] and node.get("nullable") is True, where
    elif get_origin(hint) is Literal:
        assert set(node["enum"]) == set(get_args(hint)), where
    elif get_origin(hint) is list:
        assert node["type"] == "array", where
        _agrees(schema, node["items"], get_args(hint)[0], f"{where}[]")
    elif is_typeddict(hint):
        hints = get_type_hints(hint)
        assert set(node["properties"]) == set(hints), where
        assert set(node.get("required", [])) == set(hints), f"{where}: every key is always there"
        for key, sub in hints.items():
            _agrees(schema, node["properties"][key], sub, f"{where}.{key}")
    else:
        pytest.fail(f"{where}: no rule for {hint!r}")


@pytest.mark.django_db
def test_the_schema_documents_exactly_the_status_type():
    schema = SchemaGenerator().get_schema(request=None, public=True)  # what /api/schema/ serves
    documented = schema["components"]["schemas"]["Status"]
    _agrees(schema, documented, Status, "Status")
    # Every answer that carries STATUS points at that one component.
    status_op = schema["paths"]["/api/v1/sessions/{session_id}/status/"]["get"]["responses"]["200"]
    assert status_op["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Status"}


def test_the_client_reads_the_same_type():
    assert ctxclient.Status is Status
