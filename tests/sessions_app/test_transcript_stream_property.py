"""Transcript sync, as a property: whatever the cut of a Claude Code transcript into uploads (whole
lines in any grouping, ``final`` on any of them, repeated ranges, the hook firing twice), the
sessions it makes equal a one-shot import of the file — rows, sub-agents, both contexts, the
compactions Claude Code recorded (with their backups and checkpoints) and STATUS — and no upload is
ever refused. Over every shared Claude Code transcript and over generated files with
parallel tool calls interleaved with their results, thinking blocks, sub-agents, compact boundaries,
repeated and unreadable lines."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.transcripts import read_transcript
from sessions_app.errors import ServiceError
from sessions_app.models import AgentSession, ProviderRequest
from sessions_app.services import importing, projects, transcript_sync
from tests.hypothesis_budget import DATABASE
from tests.shared_data import SHARED_DATA
from tests.transcript_stream import STEP, Upload, build, compactions, contexts, random_plan, rows, usage_of

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

FILES = sorted(p.name for p in (SHARED_DATA / "claude_code").glob("*.jsonl")) or ["<shared data missing>"]


@pytest.fixture(autouse=True)
def _no_cache(settings):
    """No cache at all: the sync keeps nothing it needs there."""
    settings.CACHES = {**settings.CACHES, "default": {"BACKEND": "django.core.cache.backends.dummy.DummyCache"}}


@pytest.fixture
def owner(django_user_model):
    user = django_user_model.objects.create_user(username="streamer", password="x-pass-123")
    return user


def _project(user: Any, name: str) -> Any:
    project = projects.project_create(user=user, name=name)
    project.policy.auto = False  # compare what was stored, not what a compaction made of it
    project.policy.save()
    return project


def replay(user: Any, project: Any, external_id: str, data: bytes, plan: list[Upload]) -> list[str]:
    """Send the plan as the hook would: an upload that fails is sent again (with more) next time,
    from where the server is. Returns the errors the server answered."""
    errors: list[str] = []
    held = 0
    for up in plan:
        start = min(up.start, held)
        try:
            result = transcript_sync.transcript_sync(
                user=user,
                project=project,
                external_id=external_id,
                offset=start,
                lines=data[start : up.end].decode("utf-8", errors="replace"),
                final=up.final,
            )
        except ServiceError as exc:
            errors.append(f"{up}: {exc.code}: {exc.detail}")
            continue
        held = result.offset
    return errors


def assert_stream_equals_import(user: Any, data: bytes, plan: list[Upload], tag: str) -> None:
    streamed_project = _project(user, f"streamed {tag}")
    imported_project = _project(user, f"imported {tag}")
    errors = replay(user, streamed_project, "cc-stream", data, plan)
    assert errors == [], "an upload was refused: the stream would be stuck"
    reference = importing.session_import(
        user=user,
        project=imported_project,
        transcript=read_transcript(data, "claude-code"),
        name="cc-stream",
    )
    main = AgentSession.objects.get(project=streamed_project, external_id="cc-stream")
    assert rows(main) == rows(reference.session)
    assert contexts(main) == contexts(reference.session)
    assert compactions(main) == compactions(reference.session)
    assert usage_of(main) == usage_of(reference.session)
    # each response's usage once, as the import has it, however its lines were cut
    fields = ("model", "created_at", "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    assert sorted(ProviderRequest.objects.filter(project=streamed_project).values_list(*fields, "output_tokens")) == (
        sorted(ProviderRequest.objects.filter(project=imported_project).values_list(*fields, "output_tokens"))
    )
    sides = list(AgentSession.objects.filter(project=streamed_project).exclude(pk=main.pk).order_by("external_id"))
    assert [s.external_id for s in sides] == sorted(f"cc-stream:{s.metadata['conversation']}" for s in sides)
    by_key = {s.metadata["conversation"]: s for s in sides}
    assert sorted(by_key) == sorted(s.metadata["conversation"] for s in reference.sidechains)
    for side in reference.sidechains:
        assert rows(by_key[side.metadata["conversation"]]) == rows(side)
        assert contexts(by_key[side.metadata["conversation"]]) == contexts(side)
        assert compactions(by_key[side.metadata["conversation"]]) == compactions(side)
        assert usage_of(by_key[side.metadata["conversation"]]) == usage_of(side)


@settings(DATABASE)
@given(steps=st.lists(STEP, min_size=1, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_any_chunking_of_a_generated_transcript_equals_its_import(owner, steps, seed):
    data = build(steps, "cc-stream").encode()
    rng = random.Random(seed)
    plan = random_plan(data, rng, max_lines=rng.choice([1, 2, 4]), p_final=rng.choice([0.2, 0.5, 1.0]))
    assert_stream_equals_import(owner, data, plan, f"{seed}")


# Claude Code compacting itself: twice in the main conversation (once while tool calls were open),
# once in a sub-agent, and the odd shapes around a boundary a cut or hostile file may hold.
BOUNDARIES = [
    ("parallel", 2, True, True),
    ("boundary", "first", False),
    ("prompt", "go on"),
    ("sequential", 2),
    ("odd_boundary", "alone"),
    ("parallel", 3, False, False),
    ("boundary", "second", False),
    ("boundary", "in a sub-agent", True),
    ("odd_boundary", "twice"),
    ("odd_boundary", "summary_only"),
    ("odd_boundary", "image"),
    ("prompt", "last"),
    ("parallel", 1, False, True),
]


def test_the_file_with_boundaries_compacts_where_claude_code_did(owner):
    data = build(BOUNDARIES, "cc-stream").encode()
    result = importing.session_import(
        user=owner, project=_project(owner, "boundaries"), transcript=read_transcript(data, "claude-code")
    )
    assert [c[2] for c in compactions(result.session)] == ["transcript"] * 3  # first, second, after two markers
    (side,) = result.sidechains
    assert [c[2] for c in compactions(side)] == ["transcript"]


@settings(DATABASE)
@given(seed=st.integers(0, 2**32 - 1), max_lines=st.sampled_from([1, 2, 3, 5, 8]), p_final=st.sampled_from([0, 0.3, 1]))
def test_any_chunking_of_a_file_with_compact_boundaries_equals_its_import(owner, seed, max_lines, p_final):
    data = build(BOUNDARIES, "cc-stream").encode()
    plan = random_plan(data, random.Random(seed), max_lines=max_lines, p_final=p_final)
    assert_stream_equals_import(owner, data, plan, f"boundaries-{seed}")


def test_final_in_the_middle_of_parallel_tool_calls_is_not_a_wedge(owner):
    """The reported case: a final upload lands while a response's tool calls are still being written."""
    data = build([("parallel", 3, True, True), ("prompt", "next"), ("parallel", 2, False, False)], "cc-stream").encode()
    ends = [i + 1 for i, b in enumerate(data) if b == 0x0A]
    plan = [Upload(a, b, True) for a, b in zip([0, *ends], ends, strict=False)]  # every line its own final upload
    plan.append(Upload(len(data), len(data), True))
    assert_stream_equals_import(owner, data, plan, "every-line-final")


@pytest.mark.data
@pytest.mark.parametrize("name", FILES)
def test_any_chunking_of_a_shared_transcript_equals_its_import(shared_data, owner, name):
    data = (shared_data / "claude_code" / name).read_bytes()
    rng = random.Random(f"stream:{name}")
    lines = data.count(b"\n")
    # Large files in fewer, larger uploads (each upload re-reads the file), and one plan rather than two;
    # small ones line by line.
    group = max(1, lines // (20 if len(data) > 1_000_000 else 60))
    for attempt in range(1 if len(data) > 1_000_000 else 2):
        plan = random_plan(data, rng, max_lines=group * (1 + 3 * attempt), p_final=0.35)
        assert_stream_equals_import(owner, data, plan, f"{name}-{attempt}")
