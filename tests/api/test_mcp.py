"""ctxweb's MCP server at ``/mcp/`` (``sessions_app/api/mcp``): the handshake Claude Code makes, the
four tools over a real compacted session — recall answers the original a placeholder names byte for
byte, search finds what only the original held — every call recorded, nothing for a key outside the
project; and the SDK's own client, over HTTP, in both its protocol eras."""

from __future__ import annotations

import asyncio
import json
import re

import httpx2
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from sessions_app.models import McpCall, Message
from sessions_app.services import compaction_runs
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = pytest.mark.django_db
ACCEPT = {"HTTP_ACCEPT": "application/json, text/event-stream"}
RECALL = re.compile(r"recall (m\d+) or revert restores")
WORD = "zqonlyinoriginal"


def rpc(client, persona, method: str, params: dict | None = None, *, id_: int | None = 1, **headers):
    message: dict[str, object] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if id_ is not None:
        message["id"] = id_
    extra = {**ACCEPT, **(persona.auth if persona else {}), **headers}
    return client.post("/mcp/", data=json.dumps(message), content_type="application/json", **extra)


def call(client, persona, tool: str, arguments: dict, **headers) -> dict:
    response = rpc(client, persona, "tools/call", {"name": tool, "arguments": arguments}, **headers)
    assert response.status_code == 200, response.content
    return response.json()["result"]


@pytest.fixture
def compacted(session_of):
    """A session whose older tool outputs a compaction cleared, each placeholder naming its recall id."""
    session = session_of(name="worked", auto_compact=False)
    messages = agent_rounds(12)
    first_output = next(
        m for m in messages if isinstance(m["content"], list) and m["content"][0]["type"] == "tool_result"
    )
    first_output["content"][0]["content"] = f"compiled {WORD} module\n" + first_output["content"][0]["content"]
    append(session, messages)
    record = compaction_runs.compaction_request(session=session, level="compact", user=None)
    assert compaction_runs.compaction_run(record.pk) == "succeeded"
    return session


def _placeholder_and_original(session) -> tuple[str, str]:
    """A recall id a placeholder shows, and the tool output it replaced, as the agent sent it."""
    for message in Message.objects.filter(session=session, state="compacted").order_by("seq"):
        for block in message.content if isinstance(message.content, list) else []:
            found = RECALL.search(json.dumps(block))
            if block.get("type") == "tool_result" and found:
                original = message.backups.order_by("pk")[0].content
                return found.group(1), next(b["content"] for b in original if b.get("type") == "tool_result")
    raise AssertionError("no placeholder names a recall id")


def test_the_handshake_claude_code_makes_lists_the_four_tools(team, client):
    response = rpc(
        client,
        team.alice,
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "claude-code", "version": "2"}},
    )
    assert response.status_code == 200
    assert response.json()["result"]["serverInfo"]["name"] == "ctxweb"
    assert response.json()["result"]["protocolVersion"] == "2025-06-18"
    notified = rpc(client, team.alice, "notifications/initialized", id_=None, HTTP_MCP_PROTOCOL_VERSION="2025-06-18")
    assert notified.status_code == 202
    listed = rpc(client, team.alice, "tools/list", HTTP_MCP_PROTOCOL_VERSION="2025-06-18").json()["result"]["tools"]
    assert sorted(t["name"] for t in listed) == ["context_status", "handoff", "recall", "search"]


def test_recall_answers_the_original_a_placeholder_names_and_is_recorded(team, client, compacted):
    ref, original = _placeholder_and_original(compacted)
    result = call(client, team.bob, "recall", {"id": ref, "session": str(compacted.pk)})
    assert not result.get("isError")
    assert original in result["content"][0]["text"]  # byte for byte
    (recorded,) = McpCall.objects.filter(session=compacted, tool="recall")
    assert (recorded.asked, recorded.found, recorded.user) == (ref, True, team.bob.user)
    assert recorded.chars == len(result["content"][0]["text"])


def test_search_finds_what_only_an_original_holds_and_recall_pages_a_long_text(team, client, compacted):
    ref, original = _placeholder_and_original(compacted)
    assert WORD in original and WORD not in json.dumps(list(Message.objects.values_list("content", flat=True)))
    found = call(client, team.carol, "search", {"query": WORD, "session": str(compacted.pk)})
    assert [hit["ref"] for hit in found["structuredContent"]["hits"]] == [ref]
    assert f"«{WORD}»" in found["content"][0]["text"]
    first = call(client, team.carol, "recall", {"id": ref, "session": str(compacted.pk)})
    assert "structuredContent" not in first  # the text is the answer (a client reads one or the other)


def test_context_status_and_handoff_by_role(team, client, compacted):
    status = call(client, team.carol, "context_status", {}, HTTP_CTXWEB_SESSION=str(compacted.pk))
    assert f"Session {compacted.pk}" in status["content"][0]["text"]
    assert status["structuredContent"]["usage_percent"] >= 0
    refused = call(client, team.carol, "handoff", {"session": str(compacted.pk)})  # a viewer writes nothing
    assert refused["isError"] and "role" in refused["content"][0]["text"]
    written = call(client, team.bob, "handoff", {"session": str(compacted.pk)})
    assert not written.get("isError")
    head, _, document = written["content"][0]["text"].partition("\n\n")
    handoff = re.match(r"(h\d+): ", head)
    assert handoff and document
    again = call(client, team.bob, "recall", {"id": handoff.group(1), "session": str(compacted.pk)})
    assert document in again["content"][0]["text"]


def test_nothing_for_a_key_outside_the_project_and_clear_errors(team, client, compacted):
    ref, _ = _placeholder_and_original(compacted)
    outside = call(client, team.mallory, "recall", {"id": ref, "session": str(compacted.pk)})
    assert outside["isError"] and "not found" in outside["content"][0]["text"].lower()
    bad = call(client, team.alice, "recall", {"id": "nonsense", "session": str(compacted.pk)})
    assert bad["isError"] and "recall id" in bad["content"][0]["text"]
    missing = call(client, team.alice, "recall", {"id": "m99999", "session": str(compacted.pk)})
    assert missing["isError"]
    assert not McpCall.objects.filter(session=compacted).exists()  # only what was answered is recorded
    assert rpc(client, None, "tools/list").status_code == 401
    assert client.get("/mcp/", **team.alice.auth).status_code == 405


@pytest.mark.django_db(transaction=True)  # a live server needs committed rows
def test_the_sdks_own_client_in_both_protocol_eras(team, live_server, session_of):
    session = session_of(name="sdk", auto_compact=False)
    append(session, [{"role": "user", "content": "find zqsdkword please"}, {"role": "assistant", "content": "ok"}])

    async def run(mode: str) -> tuple[list[str], str]:
        headers = {"Authorization": f"Bearer {team.alice.key}", "ctxweb-session": str(session.pk)}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(f"{live_server.url}/mcp/", http_client=http), mode=mode) as c,
        ):
            tools = [t.name for t in (await c.list_tools()).tools]
            found = await c.call_tool("search", {"query": "zqsdkword"})
            (first,) = found.content
            assert isinstance(first, TextContent)
            return sorted(tools), first.text

    for mode in ("legacy", "auto"):
        tools, text = asyncio.run(run(mode))
        assert tools == ["context_status", "handoff", "recall", "search"]
        assert "«zqsdkword»" in text and text.startswith("m")


def test_the_calls_show_on_the_session_page_and_in_admin(team, client, compacted, staff):
    ref, _ = _placeholder_and_original(compacted)
    call(client, team.alice, "recall", {"id": ref, "session": str(compacted.pk)})
    listed = staff.get("/admin/sessions_app/mcpcall/")  # staff: the same test client, signed in as a superuser
    assert listed.status_code == 200 and ref in listed.content.decode()
    client.force_login(team.carol.user)
    page = client.get(f"/sessions/{compacted.pk}/").content.decode()
    assert 'id="mcp-calls"' in page and f"<code>{ref}</code>" in page


@pytest.mark.parametrize("before", [150, 170, 180])
def test_a_query_holding_a_secret_is_recorded_redacted_and_cut_before_its_marker(team, client, compacted, before):
    token = "ghp_" + "a1B2c3D4e5F6" * 3
    query = "x" * before + f" GITHUB_TOKEN={token} and more words after it"
    call(client, team.bob, "search", {"query": query, "session": str(compacted.pk)})
    (recorded,) = McpCall.objects.filter(session=compacted, tool="search")
    assert token[:12] not in recorded.asked and len(recorded.asked) <= 200
    opened = recorded.asked.count("[secret:")
    assert opened == len(re.findall(r"\[secret:[a-z0-9-]+:[0-9a-f]{4}\]", recorded.asked))  # none cut in half
