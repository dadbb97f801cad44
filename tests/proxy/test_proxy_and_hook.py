"""Claude Code with both the proxy and the hook on (a user who follows both pages of the docs): its
session id is in every request's ``metadata.user_id`` and is the external id the hook uploads to,
so both meet in one session, whichever comes first; the proxy records it (what the model read, with
the exact usage), the hook's uploads add nothing to it."""

from __future__ import annotations

import json

import pytest

from sessions_app.models import AgentSession, Message
from tests.claude_code_lines import SESSION, Transcript, text
from tests.proxy.test_proxy import CALLER_KEY, MODEL, SYSTEM, TOOLS, fake, proxied  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/api/v1/sessions/transcript/"
METADATA = {"user_id": json.dumps({"device_id": "d0", "account_uuid": "", "session_id": SESSION})}


def ask(client, history: list[dict], said: str) -> None:
    history.append({"role": "user", "content": said})
    reply = client.messages.create(
        model=MODEL, max_tokens=64, system=SYSTEM, messages=history, metadata=METADATA, tools=TOOLS
    )
    history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})


def upload(api, team, lines: str, offset: int, final: bool = True):
    body = {"project": str(team.project.pk), "external_id": SESSION, "offset": offset, "lines": lines, "final": final}
    response = api.post(URL, body)
    assert response.status_code == 200, response.content
    return response.json()


def transcript_of(turns: list[str]) -> str:
    lines = Transcript()
    for n, said in enumerate(turns):
        lines.prompt(said)
        lines.response(f"msg_{n}", text(f"answer to {said}"))
    return lines.text()


@pytest.fixture
def bob_api(team, api_as):
    return api_as(team.bob)


def test_proxy_first_then_hook_one_session_recorded_by_the_proxy(proxy_sdk, team, fake, bob_api):  # noqa: F811
    client, history = proxied(proxy_sdk, team), []
    ask(client, history, "first")
    data = transcript_of(["first"])
    answer = upload(bob_api, team, data, 0)
    ask(client, history, "second")
    answer = upload(bob_api, team, transcript_of(["first", "second"])[len(data) :], len(data.encode()))
    sessions = AgentSession.objects.filter(project=team.project)
    assert sessions.count() == 1
    session = sessions.get()
    assert session.external_id == SESSION and answer["session"] == session.pk and answer["messages"] == 0
    stored = list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content"))
    assert stored == [(m["role"], m["content"]) for m in history]


def test_hook_first_with_nothing_stored_the_proxy_takes_its_session_over(proxy_sdk, team, fake, bob_api):  # noqa: F811
    first = upload(bob_api, team, "", 0, final=False)  # SessionStart: no transcript yet
    client, history = proxied(proxy_sdk, team), []
    ask(client, history, "first")
    data = transcript_of(["first"])
    later = upload(bob_api, team, data, 0)
    session = AgentSession.objects.get(project=team.project)
    assert first["session"] == later["session"] == session.pk and later["messages"] == 0
    assert Message.objects.filter(session=session).count() == len(history)


def test_a_session_the_hook_already_records_stays_the_hooks_and_the_proxys_is_linked_to_it(
    proxy_sdk,
    team,
    fake,  # noqa: F811
    bob_api,
):
    data = transcript_of(["first"])
    hooked = upload(bob_api, team, data, 0)
    assert hooked["messages"] == 2
    client, history = proxied(proxy_sdk, team), []
    ask(client, history, "first")
    main = AgentSession.objects.get(pk=hooked["session"])
    child = AgentSession.objects.exclude(pk=main.pk).get(project=team.project)
    assert child.metadata["sidechain_of"] == main.pk == child.spawned_by_id and Message.objects.filter(
        session=child
    ).count() == len(history)
    assert Message.objects.filter(session=main).count() == 2  # the hook's, untouched
