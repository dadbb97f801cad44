"""Anthropic's context-1m beta through the proxy (issue 29): the session's model is named as Claude
Code names it, ``…[1m]``, and its window is the 1M one."""

from __future__ import annotations

import json

import pytest

from sessions_app.models import AgentSession
from sessions_app.selectors import usage
from sessions_app.services.proxy import long_context_beta
from tests.proxy.test_proxy_trust import ANTHROPIC, ask, fake, post  # noqa: F401 (fake: a fixture)

pytestmark = pytest.mark.django_db
BETA = "interleaved-thinking-2025-05-14, context-1m-2025-08-07"


def test_the_beta_header_is_read_among_others():
    assert long_context_beta(BETA) and long_context_beta("context-1m-2025-08-07")
    assert not long_context_beta("") and not long_context_beta("interleaved-thinking-2025-05-14")


def test_a_request_with_the_1m_beta_records_a_session_with_the_1m_window(team, fake, client):  # noqa: F811
    fake.queue_reply("Hi.")
    headers = {"ctxweb-session": "long", "anthropic-beta": BETA}
    response, answer = post(client, ANTHROPIC, ask(), team.bob.key, **headers)
    assert response.status_code == 200, answer[:300]
    assert fake.requests_for("messages")[-1]["body"]["model"] == "claude-sonnet-4-5"  # the upstream's as sent
    session = AgentSession.objects.get(external_id="long")
    assert session.model == "claude-sonnet-4-5[1m]"
    assert usage.session_status(session)["context_window"] == 1_000_000


def test_a_session_asked_later_with_the_beta_takes_the_1m_window(team, fake, client):  # noqa: F811
    fake.queue_reply("Hi.")
    fake.queue_reply("Again.")
    post(client, ANTHROPIC, ask(), team.bob.key, **{"ctxweb-session": "later"})
    assert usage.session_status(AgentSession.objects.get(external_id="later"))["context_window"] == 200_000
    body = json.loads(ask())
    body["messages"] += [{"role": "assistant", "content": "Hi."}, {"role": "user", "content": "More."}]
    headers = {"ctxweb-session": "later", "anthropic-beta": BETA}
    response, _ = post(client, ANTHROPIC, json.dumps(body).encode(), team.bob.key, **headers)
    assert response.status_code == 200
    session = AgentSession.objects.get(external_id="later")
    assert session.model == "claude-sonnet-4-5[1m]" and session.last_seq == 4
    assert usage.session_status(session)["context_window"] == 1_000_000
