"""A client that compacts its own history (Claude Code's ``/compact``, or its automatic one): it asks
its model to summarize the conversation (not recorded), then goes on from the summary. The same
session goes on too, as an import of its transcript does at the compact boundary: what came before
leaves the context behind a checkpoint holding the summary, and the conversation is recorded after
it, request after request."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessions_app.models import AgentSession, Checkpoint, Compaction, Message, MessageState
from tests.proxy.test_proxy import MODEL, SYSTEM, TOOLS, fake, proxied  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)

METADATA = {"user_id": json.dumps({"device_id": "d0", "account_uuid": "", "session_id": "cc-compacting"})}
SUMMARY = (
    "This session is being continued from a previous conversation that ran out of context. The summary "
    "below covers the earlier portion of the conversation.\n\nThe user asked for a fix in parser.py; it was made."
)
INSTRUCTION = "Your task is to create a detailed summary of the conversation so far, paying close attention …"


def ask(client: Any, history: list[dict[str, Any]], said: Any) -> None:
    history.append({"role": "user", "content": said})
    reply = client.messages.create(
        model=MODEL, max_tokens=64, system=SYSTEM, messages=history, metadata=METADATA, tools=TOOLS
    )
    history.append({"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in reply.content]})


def stored(session: AgentSession) -> list[tuple[str, Any, str]]:
    return list(Message.objects.filter(session=session).order_by("seq").values_list("role", "content", "state"))


@pytest.mark.parametrize("summary_form", ["string", "blocks"])
def test_the_clients_own_compaction_is_a_compaction_of_the_same_session(proxy_sdk, team, fake, summary_form):  # noqa: F811
    client, before = proxied(proxy_sdk, team), []
    for said in ("Fix the parser.", "Run the tests."):
        ask(client, before, said)
    # The client summarizes its history (a request of its own, not recorded) ...
    client.messages.create(
        model=MODEL, max_tokens=64, system=SYSTEM, tools=TOOLS, metadata=METADATA,
        messages=[*before, {"role": "user", "content": INSTRUCTION}],
    )  # fmt: skip
    # ... and goes on from the summary, for several requests.
    summary: Any = SUMMARY if summary_form == "string" else [{"type": "text", "text": SUMMARY}]
    after: list[dict[str, Any]] = []
    ask(client, after, summary)
    for said in ("Now the docs.", "Thanks."):
        ask(client, after, said)

    session = AgentSession.objects.get(project=team.project)
    rows = stored(session)
    assert [(r, c) for r, c, _ in rows] == [(m["role"], m["content"]) for m in before + after]
    states = [state for _, _, state in rows]
    assert states[: len(before) + 1] == [MessageState.SUMMARIZED] * (len(before) + 1)
    assert states[len(before) + 1 :] == [MessageState.ACTIVE] * (len(after) - 1)
    compaction = Compaction.objects.get(session=session)
    checkpoint = Checkpoint.objects.get(compaction=compaction)
    assert "it was made" in json.dumps(checkpoint.data)
    summary_row = Message.objects.get(session=session, seq=len(before) + 1)
    assert summary_row.metadata.get("is_compact_summary") is True


def test_a_rewritten_history_that_is_no_compaction_still_goes_to_a_fresh_session(proxy_sdk, team, fake):  # noqa: F811
    client, history = proxied(proxy_sdk, team), []
    ask(client, history, "First.")
    edited: list[dict[str, Any]] = []
    ask(client, edited, "Something else entirely.")
    sessions = AgentSession.objects.filter(project=team.project).order_by("pk")
    assert sessions.count() == 2 and sessions.last().parent_id == sessions.first().pk
    assert not Compaction.objects.filter(session__project=team.project).exists()
