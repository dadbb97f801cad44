"""Odd values where the hook and the client read numbers: a setting such as CTX_TIMEOUT=nan, a state
file whose positions are not integers ("²"), a project named "²" or "٣". The hook still uploads
(from the top when its state is unreadable; the server ignores what it has), and the client takes
such a name as a name, never as an id."""

from __future__ import annotations

import hashlib
import json
import math

import pytest

from ctxclient import Client
from sessions_app.models import AgentSession
from sessions_app.services import projects
from tests.claude_code_lines import agent_session
from tests.integrations.test_claude_code_hook import Agent, owner  # noqa: F401 (a fixture)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "10s", "1e999"])
def test_an_odd_timeout_setting_falls_back_to_the_default(owner, live_server, tmp_path, value):  # noqa: F811
    persona, project, _ = owner
    agent = Agent(tmp_path, live_server.url, persona.key, str(project.pk), "cc-odd-timeout")
    agent.env["CTX_TIMEOUT"] = value
    agent.write(agent_session(2).text().encode())
    assert agent.run("Stop") == ""
    assert AgentSession.objects.get(external_id="cc-odd-timeout").messages.exists()


@pytest.mark.parametrize("position", ["²", "٣", -5, 1.5, None, [3], True])
def test_a_state_file_with_odd_positions_uploads_from_the_top(owner, live_server, tmp_path, position):  # noqa: F811
    persona, project, _ = owner
    agent = Agent(tmp_path, live_server.url, persona.key, str(project.pk), "cc-odd-state")
    agent.write(agent_session(2).text().encode())
    ident = hashlib.sha256(f"{live_server.url}\n{project.pk}\ncc-odd-state".encode()).hexdigest()[:32]
    state = tmp_path / "state" / f"{ident}.json"
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps({"file_pos": position, "offset": position}))
    assert agent.run("Stop") == ""
    assert AgentSession.objects.get(external_id="cc-odd-state").messages.exists()
    assert json.loads(state.read_text())["file_pos"] == agent.transcript.stat().st_size


def test_a_project_named_in_other_digits_is_found_by_name(owner, live_server):  # noqa: F811
    persona, _, _ = owner
    squared = projects.project_create(user=persona.user, name="²")
    arabic = projects.project_create(user=persona.user, name="٣")
    client = Client(live_server.url, persona.key)
    assert (client.project_id("²"), client.project_id("٣")) == (squared.pk, arabic.pk)
    assert client.project_id(str(squared.pk)) == squared.pk


@pytest.mark.parametrize("timeout", [math.nan, math.inf, 0, -1])
def test_the_client_refuses_a_timeout_that_is_not_a_positive_number(timeout):
    with pytest.raises(ValueError, match="timeout"):
        Client("http://127.0.0.1:9", "ctx_key", timeout=timeout)
