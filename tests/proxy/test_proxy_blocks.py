"""Through the proxy, every block an agent sends is stored as it came, whatever its type: Claude
Code's ``tool_reference`` blocks in a ToolSearch result, the provider's server tool blocks, types not
known yet. No note stands in for them and nothing is rejected; the session reads back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from sessions_app.models import AgentSession, IngestRejection, Message
from tests import hostile_json as hj
from tests.fakes.anthropic_server import DEFAULT_REPLY, FakeAnthropic
from tests.hypothesis_budget import SERVER
from tests.proxy_client import assert_sessions_read_back

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def upstream(settings: Any) -> Any:
    settings.CTX_PROXY_RECORDERS = 0  # recorded in the request's thread, as in test_proxy_hostile
    with FakeAnthropic() as server:
        settings.CTX_PROXY_UPSTREAM_URL = server.base_url
        yield server


def sent(client: Any, team: Any, messages: list[dict[str, Any]], conversation: str) -> Any:
    body = {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": messages}
    return client.post(
        "/proxy/anthropic/v1/messages",
        data=hj.encode(body),
        content_type="application/json",
        HTTP_CTXWEB_API_KEY=team.bob.key,
        HTTP_X_API_KEY="sk-callers-key",
        HTTP_CTXWEB_SESSION=conversation,
    )


@settings(SERVER, suppress_health_check=list(HealthCheck))
@given(messages=hj.block_conversations())
def test_blocks_of_any_type_are_recorded_as_they_came(team, upstream, client, api_as, proxy_failures, messages):
    proxy_failures.clear()
    conversation = f"blocks-{AgentSession.objects.count()}"
    first = sent(client, team, messages, conversation)
    assert first.status_code == 200, first.content[:500]
    # The agent goes on: its history again, the reply and a new prompt after it.
    history = [*messages, {"role": "assistant", "content": [{"type": "text", "text": DEFAULT_REPLY}]}]
    assert sent(client, team, [*history, {"role": "user", "content": "next"}], conversation).status_code == 200

    session = AgentSession.objects.get(project=team.project, external_id=conversation)
    rows = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    expected = hj.without_nul([*history, {"role": "user", "content": "next"}])
    assert [json.dumps(_signless_zeros(r), sort_keys=True) for r in rows[: len(expected)]] == [
        json.dumps(_signless_zeros((m["role"], m["content"])), sort_keys=True) for m in expected
    ]
    assert not IngestRejection.objects.filter(session=session).exists()
    assert [r.getMessage() for r in proxy_failures if r.exc_info] == []
    assert_sessions_read_back(team, api_as(team.bob), client)


def _signless_zeros(value: Any) -> Any:
    """``value`` with -0.0 as 0.0: the same number, which PostgreSQL's jsonb stores without its sign."""
    if isinstance(value, float) and value == 0:
        return 0.0
    if isinstance(value, dict):
        return {k: _signless_zeros(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_signless_zeros(v) for v in value]
    return value
