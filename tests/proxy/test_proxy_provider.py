"""The provider's own compaction through the proxy is recorded, not fought: a request that asks
Anthropic to compact (``context_management`` with ``compact_20260112``) goes upstream as it came even
with ``proxy_compaction`` on, the ``compaction`` block of the reply reaches the caller untouched, and
it becomes a compaction of the session (trigger ``provider``) whose summary is the checkpoint."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.models import AgentSession, Checkpoint, Compaction, Message
from sessions_app.selectors.history import session_history
from sessions_app.services import projects
from tests.fakes.anthropic_server import FakeAnthropic

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-4-5"
SUMMARY = "The user asked to fix the failing test in src/app.py; the loop bound was off by one and is fixed."
EDITS = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}]}


@pytest.fixture
def fake(settings: Any) -> Any:
    with FakeAnthropic() as server:
        settings.CTX_PROXY_UPSTREAM_URL = server.base_url
        yield server


def turns(n: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for i in range(n):
        history.append({"role": "user", "content": f"Step {i}: look at src/mod_{i}.py"})
        history.append({"role": "assistant", "content": [{"type": "text", "text": f"Looked at mod_{i}: fine."}]})
    return history


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_a_provider_compaction_passes_through_and_becomes_a_checkpoint(proxy_sdk, team, fake, stream):
    policy = projects.policy_ensure(project=team.project)
    policy.proxy_compaction = True
    policy.save()
    client = proxy_sdk({"ctxweb-api-key": team.bob.key, "anthropic-beta": "compact-2026-01-12"})
    history = [*turns(4), {"role": "user", "content": "Go on."}]
    fake.queue_message([{"type": "compaction", "content": SUMMARY}, {"type": "text", "text": "Continuing."}])
    kwargs = {"model": MODEL, "max_tokens": 64, "messages": history, "extra_body": {"context_management": EDITS}}
    if stream:
        events = list(client.messages.create(stream=True, **kwargs))
        assert any(getattr(e, "content_block", None) is not None for e in events)
    else:
        answer = client.messages.with_raw_response.create(**kwargs)
        assert answer.http_response.json()["content"][0] == {"type": "compaction", "content": SUMMARY}
        assert "ctxweb-compacted" not in answer.headers
    sent = fake.requests_for("messages")[-1]
    assert sent["body"]["messages"] == history and sent["body"]["context_management"] == EDITS
    assert sent["headers"]["anthropic-beta"] == "compact-2026-01-12"

    session = AgentSession.objects.get(project=team.project)
    record = Compaction.objects.get(session=session)
    assert (record.trigger, record.status, record.upto_seq) == ("provider", "succeeded", len(history))
    checkpoint = Checkpoint.objects.get(compaction=record)
    assert SUMMARY in checkpoint.data["summary_text"]
    states = dict(Message.objects.filter(session=session).values_list("seq", "state"))
    assert [states[seq] for seq in sorted(states)] == ["summarized"] * len(history) + ["active"]
    assert [e.trigger for e in session_history(session).events] == ["provider"]

    # The agent sends the block back with its history: stored once, no second compaction.
    history.append({"role": "assistant", "content": [{"type": "compaction", "content": SUMMARY},
                                                      {"type": "text", "text": "Continuing."}]})  # fmt: skip
    history.append({"role": "user", "content": "And now?"})
    fake.queue_reply("Done.")
    client.messages.create(**kwargs)
    assert Compaction.objects.filter(session=session).count() == 1
    assert Message.objects.filter(session=session).count() == len(history) + 1
