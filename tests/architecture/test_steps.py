"""An interface's write that sets work off goes through ``sessions_app.steps`` (store, then follow
up): no module of the interface layer calls the storing services themselves or sends the follow-up
on its own, so none can store and forget what the stored messages set off."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.architecture.layers import SESSIONS_APP_LAYERS, layer_of, modules

ROOT = Path(__file__).resolve().parents[2]

# What stores messages, by the service module's name; steps.py runs each and then its follow-up.
STORING = {
    ("ingest", "message_append"),
    ("importing", "session_import"),
    ("transcript_sync", "transcript_sync"),
    ("handoffs", "handoff_create"),
    ("demo", "demo_load"),
    ("proxy", "proxy_record_exchange"),
    ("proxy", "proxy_record_answered"),
    ("proxy", "proxy_record_request"),
    ("tasks", "followup_send"),
}


def uses_of_storing(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if (node.value.id, node.attr) in STORING:
                found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module:
            owner = node.module.rsplit(".", 1)[-1]
            found += [f"from {node.module} import {a.name}" for a in node.names if (owner, a.name) in STORING]
    return found


def test_no_interface_stores_messages_but_through_steps():
    interface = {
        name: path
        for name, path in modules(ROOT, "sessions_app").items()
        if layer_of(name, SESSIONS_APP_LAYERS) == 0  # the interface layer
    }
    assert "sessions_app.api.views" in interface and "sessions_app.management.commands.ctx" in interface
    offending = {
        name: uses for name, path in interface.items() if (uses := uses_of_storing(ast.parse(path.read_text())))
    }
    assert offending == {}


def test_the_check_sees_each_way_of_calling_a_storing_service():
    source = (
        "from sessions_app.services import ingest\n"
        "from sessions_app.services.handoffs import handoff_create\n"
        "ingest.message_append(session=s, messages=m)\n"
        "tasks.followup_send(1)\n"
        "ingest.message_count(s)\n"  # not a write that sets work off
    )
    assert sorted(uses_of_storing(ast.parse(source))) == [
        "from sessions_app.services.handoffs import handoff_create",
        "ingest.message_append (line 3)",
        "tasks.followup_send (line 4)",
    ]
