"""Every block a client sends is stored as it came and counted, whatever its type: the provider's
server tool blocks, Claude Code's ``tool_reference`` in a tool result, types not known yet. Over the
REST append, a conversation holding such blocks (in a message and in a tool result) is accepted, lists
back byte for byte, costs at least what the blocks' JSON costs, gives a valid context in both formats
(the OpenAI one with each such block as text), and reads back everywhere the house's read-back
property test reads (page, admin, compaction and revert: ``World.read_back``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given

from compaction.tokens import DEFAULT_FRAMING, OfflineTokenizer, calibrate
from tests import hostile_json as hj
from tests.api import test_readback_property as readback
from tests.api.test_readback_property import API, SETTINGS, World, same_json, start

# The house's read-back fixtures: the world (project, people, clients) and bounded shrinking.
world = readback.world
_bounded_shrinking = readback._bounded_shrinking
_quiet_server_errors = readback._quiet_server_errors

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@SETTINGS
@given(messages=hj.block_conversations())
def test_blocks_of_any_type_are_stored_as_they_came_counted_and_read_back(world: World, messages: Any) -> None:
    from sessions_app.models import AgentSession, Message
    from sessions_app.selectors import usage

    start(world)
    session = world.fresh_session(model="claude-sonnet-4-5")
    response = world.write("post", f"{API}/sessions/{session}/messages/", messages)
    assert response.status_code == 201, response.content[:800]
    listed = world.read(world.api, f"{API}/sessions/{session}/messages/?state=all").json()["results"]
    messages = hj.without_nul(messages)
    for row, sent in zip(listed, messages, strict=True):
        assert same_json(row["content"], sent["content"]), (row["content"], sent["content"])
    # Counted: each message costs what the tokenizer says of it as sent, which is at least what the
    # JSON of each block it does not read costs.
    tokenizer = OfflineTokenizer()
    rows = list(Message.objects.filter(session_id=session).order_by("seq").values_list("tokens", flat=True))
    for tokens, sent in zip(rows, messages, strict=True):
        assert tokens == tokenizer.count_message(sent["role"], sent["content"])
        blocks = hj.unread_blocks(sent["content"])
        own_json = (json.dumps(b, ensure_ascii=False, separators=(",", ":")) for b in blocks)
        assert tokens >= sum(tokenizer.count_text(text) for text in own_json)
    # STATUS moves with them: its messages figure is the stored counts' (scaled by the model's factor).
    session_row = AgentSession.objects.get(pk=session)
    factor = usage.model_info(session_row.model).calibration
    status = world.read(world.api, f"{API}/sessions/{session}/status/").json()
    assert status["messages"] == calibrate(sum(rows) + DEFAULT_FRAMING.request, factor), status

    anthropic = world.read(world.api, f"{API}/sessions/{session}/context/?format=anthropic").json()["messages"]
    sent_blocks = [json.dumps(b, sort_keys=True) for m in messages for b in hj.unread_blocks(m["content"])]
    context_blocks = {json.dumps(b, sort_keys=True) for m in anthropic for b in hj.unread_blocks(m["content"])}
    assert set(sent_blocks) <= context_blocks, "every block reaches the model as it came"

    openai = world.read(world.api, f"{API}/sessions/{session}/context/?format=openai").json()["messages"]
    rendered = json.dumps(openai, ensure_ascii=False)
    for m in openai:
        parts = m.get("content")
        assert parts is None or isinstance(parts, str) or all(p["type"] in ("text", "image_url") for p in parts), m
    for m in messages:
        for block in hj.unread_blocks(m["content"]):
            assert json.dumps(f"[{block['type']}]", ensure_ascii=False)[1:-1] in rendered, block

    world.read_back(session)
