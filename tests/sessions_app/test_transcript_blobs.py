"""Transcript sync and import of transcripts with Claude Code's request lines (``api-request-blob``,
``api-request``): the session holds each request's user message as the model read it.

Any cut into uploads gives the import when ``final`` comes where no user line is held (a Stop comes
after a response). A ``final`` anywhere else lets the held lines go as they are and the blob that
follows is skipped: the session then equals an import read with the same seals, and no upload is
refused."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.transcripts import ClaudeCodeReader, Transcript, read_transcript
from sessions_app.models import AgentSession, Message
from sessions_app.services import importing, projects, transcript_sync
from sessions_app.services.proxy.messages import identity
from tests.hypothesis_budget import DATABASE
from tests.transcript_blobs import BLOB_STEP, build_with_blobs
from tests.transcript_stream import Upload, compactions, contexts, random_plan, rows, usage_of

pytestmark = pytest.mark.django_db

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "clients" / "claude_code_2.1.328"
REAL = (FIXTURES / "transcript.jsonl").read_bytes()
EXTERNAL_ID = "cc-blobs"


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user(username="blobs", password="x-pass-123")


def _project(user: Any, name: str) -> Any:
    project = projects.project_create(user=user, name=name)
    project.policy.auto = False  # compare what was stored, not what a compaction made of it
    project.policy.save()
    return project


def replay(user: Any, project: Any, data: bytes, plan: list[Upload]) -> list[int]:
    """Send the plan as the hook would; returns the server's end of the text after each final upload."""
    sealed_at: list[int] = []
    held = 0
    for up in plan:
        start = min(up.start, held)
        result = transcript_sync.transcript_sync(
            user=user,
            project=project,
            external_id=EXTERNAL_ID,
            offset=start,
            lines=data[start : up.end].decode("utf-8", errors="replace"),
            final=up.final,
        )
        held = result.offset
        if up.final:
            sealed_at.append(data[:held].count(b"\n"))
    return sealed_at


def read_sealed(data: bytes, sealed_at: list[int]) -> Transcript:
    """The file read whole, sealed where the stream's final uploads were (``ClaudeCodeReader.seal``)."""
    lines = data.decode("utf-8", errors="replace").split("\n")
    reader, done = ClaudeCodeReader(), 0
    for at in sealed_at:
        reader.feed(lines[done:at])
        reader.seal()
        done = at
    reader.feed(lines[done:])
    reader.finish()
    return Transcript("claude-code", reader.conversations, dict(reader.skipped), dict(reader.cleaned))


def assert_stream_equals(user: Any, data: bytes, plan: list[Upload], reference: Transcript | None, tag: str) -> None:
    streamed = _project(user, f"streamed {tag}")
    sealed_at = replay(user, streamed, data, plan)
    transcript = reference or read_sealed(data, sealed_at)
    imported = importing.session_import(
        user=user, project=_project(user, f"imported {tag}"), transcript=transcript, name=EXTERNAL_ID
    )
    main = AgentSession.objects.get(project=streamed, external_id=EXTERNAL_ID)
    assert rows(main) == rows(imported.session)
    assert contexts(main) == contexts(imported.session)
    assert compactions(main) == compactions(imported.session)
    assert usage_of(main) == usage_of(imported.session)
    sides = AgentSession.objects.filter(project=streamed).exclude(pk=main.pk).order_by("external_id")
    by_key = {s.metadata["conversation"]: s for s in sides}
    assert sorted(by_key) == sorted(s.metadata["conversation"] for s in imported.sidechains)
    for side in imported.sidechains:
        assert rows(by_key[side.metadata["conversation"]]) == rows(side)


def finals_where_nothing_is_held(data: bytes, plan: list[Upload]) -> list[Upload]:
    """``plan`` with ``final`` only where the server's text ends with no user line held (as a Stop)."""
    lines = data.decode("utf-8", errors="replace").split("\n")
    out, held = [], 0
    for up in plan:
        held = max(held, up.end)
        reader = ClaudeCodeReader()
        reader.feed(lines[: data[:held].count(b"\n")])
        final = up.final and (reader.replaceable == 0 or held == len(data))
        out.append(Upload(up.start, up.end, final))
    return out


# ----------------------------------------------------------------------------- the real transcript


def test_the_import_of_the_real_transcript_holds_what_the_model_read(owner):
    result = importing.session_import(
        user=owner, project=_project(owner, "real"), transcript=read_transcript(REAL, "claude-code")
    )
    stored = list(Message.objects.filter(session=result.session).order_by("seq"))
    assert len(stored) == 10 and not result.sidechains
    # Roles and blocks as the recorded run's last request (plus the reply to it): 10 messages, not 13.
    last_request = json.loads((FIXTURES / "04.json").read_text())["body"]["messages"]
    kinds = [(m.role, [b["type"] for b in m.content]) for m in stored]
    assert kinds[:-1] == [(m["role"], [b["type"] for b in m["content"]]) for m in last_request]
    assert kinds[-1] == ("assistant", ["text"])
    # The newest user message is the last request's blob, as the proxy compares what was sent.
    blobs = [json.loads(line) for line in REAL.decode().splitlines() if '"api-request-blob"' in line]
    assert identity(stored[-2].content) == identity(blobs[-1]["message"]["content"])
    assert result.session.external_id == "00000000-0000-4000-8000-000000000000"


@pytest.mark.parametrize("seed", range(3))
def test_any_chunking_of_the_real_transcript_equals_its_import(owner, seed):
    rng = random.Random(seed)
    plan = finals_where_nothing_is_held(REAL, random_plan(REAL, rng, max_lines=rng.choice([1, 3, 8]), p_final=0.5))
    assert_stream_equals(owner, REAL, plan, read_transcript(REAL, "claude-code"), f"real-{seed}")


def test_a_final_upload_before_the_blob_keeps_the_lines_it_let_go(owner):
    """Results uploaded with ``final`` before their blob is written: stored as lines; the blob is skipped."""
    lines = REAL.decode().splitlines(keepends=True)
    blob = next(i for i, line in enumerate(lines) if '"api-request-blob"' in line and i > 20)
    cut = len("".join(lines[:blob]).encode())
    plan = [Upload(0, cut, True), Upload(cut, len(REAL), True)]
    project = _project(owner, "final before the blob")
    replay(owner, project, REAL, plan)
    session = AgentSession.objects.get(project=project, external_id=EXTERNAL_ID)
    roles = list(Message.objects.filter(session=session).order_by("seq").values_list("role", flat=True))
    assert roles == ["user", "assistant", "user", "user", "assistant"] + ["user", "assistant"] * 3
    assert session.metadata["transcript"]["sealed"] == [blob]
    assert_stream_equals(owner, REAL, plan, None, "final-before-blob")


# ----------------------------------------------------------------------------- generated transcripts


@settings(DATABASE)
@given(steps=st.lists(BLOB_STEP, min_size=1, max_size=10), seed=st.integers(0, 2**32 - 1))
def test_any_chunking_with_finals_where_nothing_is_held_equals_the_import(owner, steps, seed):
    data = build_with_blobs(steps, EXTERNAL_ID).text().encode()
    rng = random.Random(seed)
    plan = finals_where_nothing_is_held(data, random_plan(data, rng, max_lines=rng.choice([1, 2, 4]), p_final=0.5))
    assert_stream_equals(owner, data, plan, read_transcript(data, "claude-code"), f"quiet-{seed}")


@settings(DATABASE)
@given(steps=st.lists(BLOB_STEP, min_size=1, max_size=10), seed=st.integers(0, 2**32 - 1))
def test_any_chunking_with_finals_anywhere_equals_the_import_sealed_there(owner, steps, seed):
    data = build_with_blobs(steps, EXTERNAL_ID).text().encode()
    rng = random.Random(seed)
    plan = random_plan(data, rng, max_lines=rng.choice([1, 2, 4]), p_final=rng.choice([0.2, 0.5, 1.0]))
    assert_stream_equals(owner, data, plan, None, f"anywhere-{seed}")
