"""Whatever an agent sends through the proxy, ctxweb answers (or passes on the upstream's answer),
never with a server error of its own, and the session it recorded into still reads back. Bodies from
``tests/hostile_json.py``: Messages requests with hostile values in one or two places, tool turns,
resent and extended histories, and arbitrary JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import hostile_json as hj
from tests.fakes.anthropic_server import FakeAnthropic
from tests.hypothesis_budget import SERVER
from tests.proxy_client import assert_sessions_read_back

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

requests = st.one_of(
    hj.mutated(
        st.fixed_dictionaries(
            {
                "model": st.sampled_from(["claude-sonnet-4-5", "claude-haiku-4-5"]),
                "max_tokens": st.integers(1, 4096),
                "messages": st.lists(hj.message(), min_size=1, max_size=4),
            },
            optional={
                "system": st.one_of(hj.text(), st.lists(hj.text_block, max_size=2)),
                "metadata": st.fixed_dictionaries({"user_id": hj.text()}),
                "stream": st.booleans(),
            },
        )
    ),
    st.builds(lambda turns: {"model": "claude-sonnet-4-5", "max_tokens": 64, "messages": turns}, hj.tool_turn()),
    hj.JSON_ANY,
)


@pytest.fixture
def upstream(settings: Any) -> Any:
    # Recorded in the request's own thread: the test's data lives in a transaction only its
    # connection sees (the recording code is the same; tests/proxy/test_proxy.py runs it in the lanes).
    settings.CTX_PROXY_RECORDERS = 0
    with FakeAnthropic() as server:
        settings.CTX_PROXY_UPSTREAM_URL = server.base_url
        yield server


def sent(client: Any, path: str, body: Any, team: Any, **headers: str) -> tuple[Any, bytes]:
    """A hostile body through the proxy as Bob (and the caller's own key in ``headers``): the
    response and the whole answer, a stream read to its end."""
    response = client.post(
        path, data=hj.encode(body), content_type="application/json", HTTP_CTXWEB_API_KEY=team.bob.key, **headers
    )
    return response, b"".join(response.streaming_content) if response.streaming else response.content


@settings(SERVER, max_examples=2 * SERVER.max_examples, suppress_health_check=list(HealthCheck))
@given(bodies=st.lists(requests, min_size=1, max_size=3), resend=st.booleans())
def test_no_server_error_and_every_recorded_session_reads_back(
    team, upstream, client, api_as, proxy_failures, bodies, resend
):
    api = api_as(team.bob)
    proxy_failures.clear()
    for body in bodies + ([bodies[0]] if resend else []):
        response, answer = sent(client, "/proxy/anthropic/v1/messages", body, team, HTTP_X_API_KEY="sk-callers-key")
        # A 5xx is only ever the upstream's own, passed on (it says which request it was).
        assert response.status_code < 500 or response.has_header("request-id"), answer[:500]
        if response.status_code >= 400:
            error = json.loads(answer)
            assert error["type"] == "error" and error["error"]["message"], error
    # Recording never failed with an exception (it would have been logged and the call forwarded).
    assert [r.getMessage() for r in proxy_failures if r.exc_info] == []
    assert_sessions_read_back(team, api, client)


openai_requests = st.one_of(
    hj.mutated(
        st.fixed_dictionaries(
            {"model": st.sampled_from(["gpt-4o", "o3"]), "messages": st.lists(hj.message(), min_size=1, max_size=4)},
            optional={"user": hj.text(), "stream": st.booleans(), "tools": st.lists(hj.JSON_ANY, max_size=2)},
        )
    ),
    hj.JSON_ANY,
)


@settings(SERVER, max_examples=2 * SERVER.max_examples, suppress_health_check=list(HealthCheck))
@given(bodies=st.lists(openai_requests, min_size=1, max_size=3))
def test_openai_bodies_no_server_error_and_every_recorded_session_reads_back(
    team, openai_upstream, client, api_as, proxy_failures, bodies
):
    api = api_as(team.bob)
    proxy_failures.clear()
    for body in bodies:
        response, answer = sent(
            client, "/proxy/openai/v1/chat/completions", body, team, HTTP_AUTHORIZATION="Bearer sk-x"
        )
        assert response.status_code < 500 or response.has_header("x-request-id"), answer[:500]
        if response.status_code >= 400:
            assert json.loads(answer)["error"]["message"], answer[:500]
    assert [r.getMessage() for r in proxy_failures if r.exc_info] == []
    assert_sessions_read_back(team, api, client)


@pytest.fixture
def openai_upstream(settings: Any) -> Any:
    from tests.fakes.openai_server import FakeOpenAI

    settings.CTX_PROXY_RECORDERS = 0  # as for the Anthropic bodies above
    with FakeOpenAI() as server:
        settings.CTX_PROXY_OPENAI_URL = server.base_url
        yield server


_roles = hj.sometimes(st.sampled_from(["user", "assistant", "developer", "system"]), hj.HOSTILE_STR, 10)
_parts = st.lists(
    st.one_of(
        st.fixed_dictionaries({"type": st.sampled_from(["input_text", "output_text"]), "text": hj.text()}),
        st.fixed_dictionaries({"type": st.just("input_image"), "image_url": hj.text()}),
        hj.JSON_ANY,
    ),
    max_size=3,
)
response_items = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("message"), "role": _roles, "content": st.one_of(hj.text(), _parts)},
        optional={"id": hj.text()},
    ),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["function_call", "custom_tool_call"]),
            "call_id": hj.tool_ids,
            "name": hj.tool_names,
            "arguments": hj.text(),
            "input": hj.text(),
        }
    ),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["function_call_output", "custom_tool_call_output"]),
            "call_id": hj.tool_ids,
            "output": st.one_of(hj.text(), _parts),
        }
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["reasoning", "compaction", "web_search_call", "compaction_trigger"])},
        optional={"id": hj.text(), "summary": hj.JSON_ANY, "encrypted_content": hj.text()},
    ),
    hj.JSON_ANY,
)
responses_requests = st.one_of(
    hj.mutated(
        st.fixed_dictionaries(
            {
                "model": st.sampled_from(["gpt-5.5", "o3"]),
                "input": st.one_of(hj.text(), st.lists(response_items, max_size=6)),
            },
            optional={
                "instructions": hj.text(),
                "stream": st.booleans(),
                "store": st.booleans(),
                "previous_response_id": hj.text(),
                "tools": st.lists(hj.JSON_ANY, max_size=2),
            },
        )
    ),
    hj.JSON_ANY,
)


@settings(SERVER, max_examples=2 * SERVER.max_examples, suppress_health_check=list(HealthCheck))
@given(bodies=st.lists(responses_requests, min_size=1, max_size=3), codex=st.booleans())
def test_responses_bodies_no_server_error_and_every_recorded_session_reads_back(
    team, openai_upstream, client, api_as, proxy_failures, bodies, codex
):
    api = api_as(team.bob)
    proxy_failures.clear()
    headers = {"HTTP_SESSION_ID": "codex-thread"} if codex else {}
    for body in bodies:
        response, answer = sent(
            client, "/proxy/openai/v1/responses", body, team, HTTP_AUTHORIZATION="Bearer sk-x", **headers
        )
        assert response.status_code < 500 or response.has_header("x-request-id"), answer[:500]
        if response.status_code >= 400:
            assert json.loads(answer)["error"]["message"], answer[:500]
    assert [r.getMessage() for r in proxy_failures if r.exc_info] == []
    assert_sessions_read_back(team, api, client)
