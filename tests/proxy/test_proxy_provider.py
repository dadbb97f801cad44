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
from tests.proxy_client import as_kept, sdk_reply

pytestmark = pytest.mark.django_db(transaction=True)

MODEL = "claude-sonnet-4-5"
SUMMARY = "The user asked to fix the failing test in src/app.py; the loop bound was off by one and is fixed."
EDITS = {"edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}]}


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


CLEARING = {
    "edits": [
        {
            "type": "clear_tool_uses_20250919",
            "trigger": {"type": "input_tokens", "value": 400},
            "keep": {"type": "tool_uses", "value": 2},
            "exclude_tools": ["Grep"],
        }
    ]
}


def stored_cleared(session: AgentSession) -> list[str]:
    """The tool uses whose results the stored context holds cleared."""
    from compaction.reversible import MARK

    rows = Message.objects.filter(session=session, state__in=["active", "compacted"]).order_by("seq")
    return [
        b["tool_use_id"]
        for content in rows.values_list("content", flat=True)
        if isinstance(content, list)
        for b in content
        if b.get("type") == "tool_result" and str(b.get("content")).startswith(MARK)
    ]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_the_providers_tool_clearing_is_recorded_as_its_model_read_it_and_reverts(
    proxy_sdk, team, fake, api_as, stream
):
    from sessions_app.selectors import usage
    from tests.fakes.anthropic_server import CLEARED_TOOL_RESULT

    client = proxy_sdk({"ctxweb-api-key": team.bob.key, "anthropic-beta": "context-management-2025-06-27"})
    history: list[dict[str, Any]] = [{"role": "user", "content": "Read every module and report."}]
    for n in range(8):
        if n < 7:
            tool = "Grep" if n == 1 else "Read"
            fake.queue_message([{"type": "tool_use", "id": f"toolu_{n}", "name": tool, "input": {"path": f"m{n}.py"}}])
        else:
            fake.queue_reply("All read.")
        kwargs = {"model": MODEL, "max_tokens": 64, "messages": history, "extra_body": {"context_management": CLEARING}}
        reply = sdk_reply(client, stream=stream, **kwargs)
        history.append(as_kept(reply))
        if n < 7:
            output = f"module {n}: " + "def f(): pass\n" * 30
            history.append(
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": output}]}
            )
    session = AgentSession.objects.get(project=team.project)
    seen = fake.edited[-1]["messages"]  # what the model read last
    read_cleared = [b["tool_use_id"] for m in seen if isinstance(m["content"], list) for b in m["content"]
                    if b.get("type") == "tool_result" and b.get("content") == CLEARED_TOOL_RESULT]  # fmt: skip
    assert len(read_cleared) == 4 and "toolu_1" not in read_cleared  # the excluded tool's result stays
    assert stored_cleared(session) == read_cleared
    records = list(Compaction.objects.filter(session=session, trigger="provider").order_by("pk"))
    assert records and all((r.status, r.level) == ("succeeded", "compact") for r in records)
    status = usage.session_status(session)
    assert status["token_source"] == "exact"
    assert status["used"] == fake.count_tokens_for(fake.edited[-1]) + reply.usage.output_tokens
    # Reverting the provider's clearings brings the results back in ctxweb's copy (the agent has them all).
    for record in reversed(records):
        assert api_as(team.bob).post(f"/api/v1/compactions/{record.pk}/revert/").status_code == 200
    assert stored_cleared(AgentSession.objects.get(pk=session.pk)) == []
