"""Secrets never stored in the clear (``services.redaction``): generated secrets of every kind, sent in
messages, tool inputs and results, system prompts and tools, a transcript imported and the same one
uploaded line by line, are in no table, no page, no export and no log line afterwards; the markers
that stand for them are the same however the transcript came; a compaction's revert brings back the
redacted original; the session's audit counts what was replaced."""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import pytest
from django.test import Client
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from compaction.redact import MARKER
from compaction.transcripts import read_transcript
from sessions_app.models import (
    AgentSession,
    Message,
    MessageBackup,
    TranscriptChunk,
    Webhook,
    WebhookDelivery,
    WebhookEvent,
)
from sessions_app.services import importing, projects
from tests.hypothesis_budget import DATABASE
from tests.redacted import table_text
from tests.secret_values import BY_CONTEXT, SECRETS, leaked
from tests.transcript_stream import Writer, text_block, tool_block

pytestmark = pytest.mark.django_db

RUNS = itertools.count()
ANY_SECRET = st.sampled_from(sorted(SECRETS)).flatmap(lambda kind: SECRETS[kind])


def transcript(session_id: str, texts: list[str], secrets: list[str]) -> str:
    """A Claude Code transcript with each ``texts`` in a prompt, a tool call's input, its output and
    the answer; ``secrets`` as tool inputs' values under a secret's name."""
    w = Writer(session_id)
    for n, (text, secret) in enumerate(zip(texts, secrets, strict=True)):
        w.prompt(f"deploy with this: {text}")
        call = tool_block(f"toolu_{session_id}_{n}", f"echo {text}")
        call["input"]["api_key"] = secret
        w.block(f"msg_{session_id}_{n}", call)
        w.result(f"toolu_{session_id}_{n}", f"$ cat .env\n{text}\n")
        w.block(f"msg_{session_id}_{n}b", text_block(f"Done; the credential {text} works."))
    for n in range(6):  # later work, so that a summary has the turns above to take
        w.prompt(f"Now check module {n}.")
        w.block(f"msg_{session_id}_later{n}", tool_block(f"toolu_{session_id}_later{n}", f"pytest tests/m{n}"))
        w.result(f"toolu_{session_id}_later{n}", "\n".join(f"tests/m{n}.py::test_{i} PASSED" for i in range(40)))
        w.block(f"msg_{session_id}_later{n}b", text_block(f"Module {n} passes."))
    return w.text()


def upload_in_pieces(api: Any, project: Any, external_id: str, data: str, cuts: list[int]) -> int:
    """``data`` uploaded as the hook does, in pieces of whole lines ending after the lines ``cuts``
    names (line numbers), the last piece final."""
    lines = data.splitlines(keepends=True)
    ends = sorted({min(max(c, 1), len(lines)) for c in cuts} | {len(lines)})
    offset, start, answer = 0, 0, {}
    for end in ends:
        piece = "".join(lines[start:end])
        body = {"project": str(project.pk), "external_id": external_id, "offset": offset, "lines": piece}
        response = api.post("/api/v1/sessions/transcript/", {**body, "final": end == len(lines)})
        assert response.status_code == 200, response.content
        answer, offset, start = response.json(), offset + len(piece.encode()), end
    return answer["session"]


def stored_messages(session_id: int) -> list[tuple[Any, ...]]:
    return list(Message.objects.filter(session_id=session_id).order_by("seq").values_list("role", "content"))


@hsettings(DATABASE, max_examples=8)
@given(drawn=st.lists(ANY_SECRET, min_size=2, max_size=4), cuts=st.lists(st.integers(1, 60), max_size=12))
def test_no_secret_is_stored_or_shown_whichever_way_it_came(team, api_as, staff, caplog, drawn, cuts):
    caplog.set_level(logging.DEBUG)
    n = next(RUNS)  # names and ids of its own in every example (the database is the test's)
    Webhook.objects.get_or_create(  # every event's payload is kept (and scanned below)
        project=team.project, url="http://127.0.0.1:9/hook", defaults={"events": list(WebhookEvent.values)}
    )
    secrets, texts = [s for s, _ in drawn], [t for _, t in drawn]
    bob = api_as(team.bob)
    # REST: a session with the secrets in its system prompt and tools, then messages of every shape.
    created = bob.post(
        "/api/v1/sessions/",
        {
            "project": team.project.pk,
            "name": f"run {n}",
            "system_prompt": f"Use {texts[0]} to connect.",
            "tools": [{"name": "deploy", "description": f"token {texts[-1]}", "input_schema": {"type": "object"}}],
        },
    )
    assert created.status_code == 201, created.content
    session = created.json()["id"]
    messages = [
        {"role": "user", "content": f"my keys: {' '.join(texts)}"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Running it."},
            {"type": "tool_use", "id": f"call_{n}", "name": "Bash",
             "input": {"command": texts[0], "password": secrets[-1]}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"call_{n}", "content": "\n".join(texts)}]},
    ]  # fmt: skip
    assert bob.post(f"/api/v1/sessions/{session}/messages/", messages).status_code == 201
    assert bob.patch(f"/api/v1/sessions/{session}/", {"system_prompt": f"now {texts[-1]}"}).status_code == 200
    # A transcript, imported at once and uploaded in any pieces: the same session either way.
    data = transcript(f"cc-{n}", texts, secrets)
    reference = projects.project_create(user=team.alice.user, name=f"reference {n}")
    imported = importing.session_import(
        user=team.alice.user, project=reference, transcript=read_transcript(data, "claude-code"), name=f"cc-{n}"
    ).session
    streamed = upload_in_pieces(bob, team.project, f"cc-{n}", data, cuts)
    assert stored_messages(streamed) == stored_messages(imported.pk)
    assert AgentSession.objects.get(pk=streamed).redactions == imported.redactions != {}
    # Compacted, summarized and reverted: the originals kept for the revert are the redacted ones.
    assert bob.patch(f"/api/v1/sessions/{streamed}/", {"context_window": 4_000}).status_code == 200
    compacted = bob.post(f"/api/v1/sessions/{streamed}/compactions/", {"level": "summarize"})
    assert compacted.status_code == 202, compacted.content
    assert bob.get(f"/api/v1/compactions/{compacted.json()['id']}/").json()["status"] == "succeeded"
    assert MessageBackup.objects.filter(compaction_id=compacted.json()["id"]).exists()
    assert bob.post(f"/api/v1/compactions/{compacted.json()['id']}/revert/").status_code == 200
    assert stored_messages(streamed) == stored_messages(imported.pk)
    handoff = bob.post(f"/api/v1/sessions/{session}/handoff/", {})
    assert handoff.status_code in (200, 201), handoff.content

    stored = table_text()
    shown = [
        bob.get(f"/api/v1/sessions/{session}/context/").content,
        bob.get(f"/api/v1/sessions/{streamed}/messages/?state=all").content,
        bob.get(f"/api/v1/handoffs/{handoff.json()['id']}/download/?format=md").content,
        b"".join(bob.get(f"/api/v1/projects/{team.project.pk}/requests/?format=csv").streaming_content),
    ]
    member = Client()
    member.force_login(team.alice.user)
    shown += [member.get(f"/sessions/{s}/").content for s in (session, streamed)]
    shown += [member.get(f"/projects/{team.project.pk}/").content]
    admin = ["message/?q=", "agentsession/", f"agentsession/{session}/change/", "checkpoint/", "compaction/",
             "ingestrejection/", "webhookdelivery/"]  # fmt: skip
    for path in admin:
        page = staff.get(f"/admin/sessions_app/{path}")
        assert page.status_code == 200, path
        shown.append(page.content)
    logs = "\n".join(r.getMessage() + repr(r.__dict__) for r in caplog.records)
    pages = "\n".join(page.decode() for page in shown)
    for secret in secrets:
        assert not leaked(secret, stored, 16)
        assert not leaked(secret, pages, 16)
        assert not leaked(secret, logs, 16)
    assert MARKER.search(stored)  # what stands for them is there
    assert WebhookDelivery.objects.filter(webhook__project=team.project).exists()
    assert TranscriptChunk.objects.filter(session_id=streamed).exists()  # kept, sealed
    audit = AgentSession.objects.get(pk=session).redactions
    assert sum(audit.values()) >= len(set(secrets))
    assert json.dumps(audit).isascii() and all(isinstance(v, int) for v in audit.values())


def test_a_project_switches_a_kind_off_and_adds_its_own_patterns(team, api_as):
    bob, alice = api_as(team.bob), api_as(team.alice)
    policy = f"/api/v1/projects/{team.project.pk}/policy/"
    wrongs = [
        ({"redact_off": ["no-such-kind"]}, "redact_off"),
        ({"redact_off": "aws-access-key"}, "redact_off"),
        ({"redact_patterns": ["(a+)+"]}, "redact_patterns"),
        ({"redact_patterns": ["["]}, "redact_patterns"),
    ]
    for wrong, field in wrongs:
        answer = alice.patch(policy, wrong)
        assert answer.status_code == 400 and field in json.dumps(answer.json()), answer.content
        assert "code" in answer.json() and "detail" in answer.json()
    assert (
        alice.patch(policy, {"redact_off": ["aws-access-key"], "redact_patterns": [r"ACME-(\d{6})"]}).status_code == 200
    )
    session = bob.post("/api/v1/sessions/", {"project": team.project.pk, "name": "own rules"}).json()["id"]
    sent = "AKIAQ7XW2ZK9PL4M8N3R is fine here; ticket ACME-123456 is ours; ghp_Zq8mW2xK4vN7bT1cR5yL9pD3fH6jA0sE2uG8"
    assert bob.post(f"/api/v1/sessions/{session}/messages/", {"role": "user", "content": sent}).status_code == 201
    (stored,) = Message.objects.filter(session_id=session).values_list("content", flat=True)
    assert "AKIAQ7XW2ZK9PL4M8N3R" in stored and "123456" not in stored and "ACME-[secret:custom:" in stored
    assert "ghp_" not in stored
    assert AgentSession.objects.get(pk=session).redactions == {"custom": 1, "github-token": 1}
    # A preset leaves the project's rules as they are.
    assert alice.patch(policy, {"preset": "default"}).status_code == 200
    assert alice.get(policy).json()["redact_off"] == ["aws-access-key"]


@hsettings(DATABASE, max_examples=6)
@given(
    secret=st.sampled_from(sorted(set(SECRETS) - BY_CONTEXT))
    .flatmap(lambda kind: SECRETS[kind])
    .map(lambda p: p[0])
    .filter(lambda s: len(s) <= 90)  # an id, a name, a model a column holds
)
def test_a_secret_in_an_id_is_refused_and_in_a_short_field_fits_its_column(team, api_as, secret):
    """An id the client matches on is refused with a clear 400, nothing written; a name or model holding
    a secret is stored redacted and within its column, however much longer the marker is; an error's
    detail does not quote the secret back."""
    bob = api_as(team.bob)
    before = (AgentSession.objects.count(), Message.objects.count())
    for body in ({"external_id": secret}, {"external_id": f"run-{secret}"}):
        answer = bob.post("/api/v1/sessions/", {"project": team.project.pk, "name": "ids", **body})
        assert answer.status_code == 400 and answer.json()["code"] == "secret_in_identifier", answer.content
        assert not leaked(secret, answer.content.decode())
    sync = {"project": str(team.project.pk), "external_id": secret, "offset": 0, "lines": ""}
    answer = bob.post("/api/v1/sessions/transcript/", sync)
    assert answer.status_code == 400 and answer.json()["code"] == "secret_in_identifier", answer.content
    assert (AgentSession.objects.count(), Message.objects.count()) == before
    name = "x" * (199 - len(secret)) + " " + secret  # as long as a name may be: its marker is longer
    created = bob.post("/api/v1/sessions/", {"project": team.project.pk, "name": name, "model": f"m {secret}"})
    assert created.status_code == 201, created.content
    session = AgentSession.objects.get(pk=created.json()["id"])
    assert len(session.name) <= 200 and len(session.model) <= 100
    assert not leaked(secret, session.name + session.model)
    assert "[secret:" not in session.name.rsplit("]", 1)[-1]  # no marker cut in half
    # A short password's marker is longer than it: the name still fits, created or renamed.
    short = "x" * 179 + " DB_PASSWORD=Qx7pL2vZ"
    for answer in (
        bob.post("/api/v1/sessions/", {"project": team.project.pk, "name": short}),
        bob.patch(f"/api/v1/sessions/{session.pk}/", {"name": short}),
    ):
        assert answer.status_code in (200, 201), answer.content
        stored = AgentSession.objects.get(pk=answer.json()["id"]).name
        assert len(stored) <= 200 and "Qx7pL2vZ" not in stored and "[secret:" not in stored.rsplit("]", 1)[-1]
    url = f"/api/v1/sessions/{session.pk}/messages/"
    answer = bob.post(url, {"role": "user", "content": "hello", "client_id": secret})
    assert answer.status_code == 400 and answer.json()["code"] == "secret_in_identifier", answer.content
    answer = bob.post(url, {"role": secret, "content": "hello"})
    assert answer.status_code == 400 and not leaked(secret, answer.content.decode()), answer.content
    assert Message.objects.filter(session=session).count() == 0
    assert not leaked(secret, table_text())
