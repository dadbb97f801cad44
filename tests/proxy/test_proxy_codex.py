"""What the real Codex CLI sent (``tests/fixtures/clients/codex_0.169.0/``: a plain two-turn run, one
that compacted its history itself, one the provider compacted), replayed through the proxy against
the scripted Codex upstream: one session per thread, whose messages equal ``ctx import --format
codex`` of the rollout file Codex wrote in that run — its compaction requests recorded as no turn,
the history it started over from recorded after what came before, its summary the boundary."""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx2
import pytest

from compaction.transcripts import read_transcript
from compaction.transcripts.responses import asks_to_compact, is_compact_summary
from sessions_app.models import AgentSession, Compaction
from sessions_app.services import importing, projects
from tests.clients.codex import FIXTURES, load_fixtures
from tests.fakes.openai_responses import message
from tests.fakes.openai_server import FakeOpenAI
from tests.proxy.raw_upstream import CALLER_KEY

pytestmark = pytest.mark.django_db(transaction=True)

RUNS = {"plain": FIXTURES, "compacted": FIXTURES / "compacted", "compacted_remote": FIXTURES / "compacted_remote"}


@pytest.fixture
def fake(settings: Any) -> Any:
    with FakeOpenAI() as server:
        settings.CTX_PROXY_OPENAI_URL = server.base_url
        # Each exchange recorded before the next request is read (one connection): SQLite takes one writer.
        settings.CTX_PROXY_RECORDERS = 0
        yield server


def answers_of(bodies: list[dict[str, Any]], rollout: str) -> list[list[dict[str, Any]]]:
    """What the model answered each request in that run, as Codex sent it back in the next one (its
    ids, its encrypted reasoning): the model's items after the request's input; for a compaction
    request, the summary or the provider's compaction item the history starts over with; for the last,
    the rollout's last message."""
    out = []
    for body, after in itertools.pairwise(bodies):
        sent, next_input = body["input"], after["input"]
        if sent[-1].get("type") == "compaction_trigger":
            out.append([i for i in next_input if i.get("type") == "compaction"])
        elif asks_to_compact(sent):
            summary = next(
                i for i in next_input if is_compact_summary({"role": i.get("role"), "content": i.get("content")})
            )
            out.append([message(summary["content"][0]["text"].split(":\n", 1)[1])])
        else:
            new = next_input[len(sent) :]
            out.append(list(itertools.takewhile(lambda i: i.get("role") != "user" and "output" not in i["type"], new)))
    lines = [json.loads(line) for line in rollout.splitlines() if line.strip()]
    last = [ln["payload"] for ln in lines if ln["type"] == "response_item" and ln["payload"].get("role") == "assistant"]
    return [*out, [last[-1]]]


def said(session: AgentSession) -> list[tuple[str, Any, bool]]:
    return [(m.role, m.content, bool(m.metadata.get("is_compact_summary"))) for m in session.messages.order_by("seq")]


@pytest.mark.parametrize("run", sorted(RUNS))
def test_a_codex_run_through_the_proxy_is_one_session_equal_to_its_import(live_server, team, fake, run):
    folder = RUNS[run]
    requests = load_fixtures(folder)
    for answer in answers_of([r["body"] for r in requests], (folder / "rollout.jsonl").read_text()):
        fake.responses.queue_reply(answer)
    with httpx2.Client(base_url=live_server.url, timeout=30) as client:
        for request in requests:
            headers = {"authorization": f"Bearer {CALLER_KEY}", "ctxweb-api-key": team.bob.key,
                       "session-id": request["headers"]["session-id"]}  # fmt: skip
            answer = client.post("/proxy/openai/v1/responses", json=request["body"], headers=headers)
            assert answer.status_code == 200, answer.text[:300]
    (proxied,) = AgentSession.objects.filter(project=team.project)  # one thread, one session
    imported = importing.session_import(
        user=team.bob.user,
        project=projects.project_create(user=team.bob.user, name="imported"),
        transcript=read_transcript((folder / "rollout.jsonl").read_bytes(), "codex"),
    ).session
    assert proxied.external_id == imported.external_id
    ours, theirs = said(proxied), said(imported)
    assert ours == theirs, next(
        (
            f"message {n + 1}: proxy {a!r:.300} / import {b!r:.300}"
            for n, (a, b) in enumerate(zip(ours, theirs, strict=False))
            if a != b
        ),
        f"proxy {len(ours)} messages, import {len(theirs)}",
    )
    compactions = [(c.trigger, c.status) for c in Compaction.objects.filter(session=proxied)]
    assert compactions == [(c.trigger, c.status) for c in Compaction.objects.filter(session=imported)]
    # Codex's summary is the boundary, the provider's opaque item a provider compaction: what came
    # before either left the context, revertibly.
    assert compactions == {"plain": [], "compacted": [("transcript", "succeeded")],
                           "compacted_remote": [("provider", "succeeded")]}[run]  # fmt: skip
    assert [m.state for m in proxied.messages.order_by("seq")] == [m.state for m in imported.messages.order_by("seq")]
