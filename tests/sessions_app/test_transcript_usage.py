"""What a Claude Code transcript's lines say their responses used, read back from ctxweb: one
``ProviderRequest`` row per response (``source="transcript"``), through an import and through the
hook's uploads in any chunking. The expected figures come
from the JSONL itself, read here line by line, not through ctxweb's reader."""

from __future__ import annotations

import json
import random
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.transcripts import read_transcript
from sessions_app.models import AgentSession, ProviderRequest, RequestSource
from sessions_app.selectors.usage import session_status
from sessions_app.services import importing, projects, transcript_sync
from tests.hypothesis_budget import DATABASE
from tests.shared_data import SHARED_DATA
from tests.transcript_stream import random_plan

pytestmark = pytest.mark.django_db

FILES = sorted(p.name for p in (SHARED_DATA / "claude_code").glob("*.jsonl")) or ["<shared data missing>"]
KINDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user(username="usage-reader", password="x-pass-123")


def _project(user: Any, name: str) -> Any:
    project = projects.project_create(user=user, name=name)
    project.policy.auto = False  # the figures as recorded, not what a compaction made of them
    project.policy.save()
    return project


def _lines(data: bytes) -> list[dict[str, Any]]:
    out = []
    for raw in data.decode("utf-8", errors="replace").split("\n"):
        try:
            event = json.loads(raw)
        except ValueError:
            continue
        if (
            isinstance(event, dict)
            and event.get("type") in ("user", "assistant")
            and isinstance(event.get("message"), dict)
        ):
            out.append(event)
    return out


def responses_in(data: bytes) -> dict[str, dict[str, Any]]:
    """Per message id with usage (not Claude Code's ``<synthetic>`` stand-ins): its last line's usage,
    model and first line's time, in order of first appearance."""
    found: dict[str, dict[str, Any]] = {}
    for event in _lines(data):
        body = event["message"]
        if event["type"] != "assistant" or not isinstance(body.get("usage"), dict):
            continue
        if body.get("model") == "<synthetic>" or not isinstance(body.get("id"), str) or not body["id"]:
            continue
        first = found.get(body["id"], {"timestamp": event.get("timestamp"), "model": body.get("model")})
        found[body["id"]] = {**first, "usage": body["usage"], "model": body.get("model") or first["model"]}
    return found


def expected_rows(data: bytes) -> list[tuple[Any, ...]]:
    rows = []
    for response in responses_in(data).values():
        usage = response["usage"]
        figures = tuple(usage.get(k, 0) if isinstance(usage.get(k), int) else 0 for k in KINDS)
        rows.append((response["model"], *figures, usage.get("service_tier") or ""))
    return sorted(rows)


def stored_rows(project: Any) -> list[tuple[Any, ...]]:
    fields = ("model", *KINDS, "service_tier")
    return sorted(ProviderRequest.objects.filter(project=project).values_list(*fields))


@pytest.mark.data
@pytest.mark.parametrize("name", FILES)
def test_an_import_has_the_usage_each_response_reports(shared_data, owner, name):
    data = (shared_data / "claude_code" / name).read_bytes()
    project = _project(owner, name)
    result = importing.session_import(user=owner, project=project, transcript=read_transcript(data, "claude-code"))

    assert stored_rows(project) == expected_rows(data)
    rows = ProviderRequest.objects.filter(project=project)
    assert {r.source for r in rows} <= {RequestSource.TRANSCRIPT}
    assert all(r.status is None and r.ttfb_ms is None and r.duration_ms is None for r in rows)
    # each row at its response's time (the first line's)
    times = sorted(datetime.fromisoformat(r["timestamp"].replace("Z", "+00:00")) for r in responses_in(data).values())
    assert sorted(r.created_at for r in rows) == times

    # The figures a transcript reports are rows, not yet the session's exact count.
    assert session_status(result.session)["token_source"] == "estimate"


# Sub-agents in the file, parallel tool calls, an interrupted request, a compact boundary.
SYNCED = [n for n in FILES if n.startswith(("ccviewer", "spotter_tool_heavy", "reliab_coverage-test-fix-v2"))]


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("name", SYNCED or ["<shared data missing>"])
@settings(DATABASE)
@given(seed=st.integers(0, 2**32 - 1), max_lines=st.sampled_from([1, 2, 3, 7]), p_final=st.sampled_from([0, 0.3, 1]))
def test_uploads_in_any_chunking_record_what_an_import_records(owner, name, seed, max_lines, p_final):
    path = SHARED_DATA / "claude_code" / name
    if not path.is_file():
        pytest.skip(f"the shared transcripts are not at {SHARED_DATA}")
    data = path.read_bytes()
    streamed, imported = _project(owner, f"streamed {seed}"), _project(owner, f"imported {seed}")
    held = 0
    for up in random_plan(data, random.Random(seed), max_lines=max_lines, p_final=p_final):
        start = min(up.start, held)
        held = transcript_sync.transcript_sync(
            user=owner,
            project=streamed,
            external_id="cc",
            offset=start,
            lines=data[start : up.end].decode("utf-8", errors="replace"),
            final=up.final,
        ).offset
    reference = importing.session_import(user=owner, project=imported, transcript=read_transcript(data, "claude-code"))

    assert stored_rows(streamed) == stored_rows(imported) == expected_rows(data)
    times = sorted(ProviderRequest.objects.filter(project=streamed).values_list("created_at", "cost_usd"))
    assert times == sorted(ProviderRequest.objects.filter(project=imported).values_list("created_at", "cost_usd"))
    main = AgentSession.objects.get(project=streamed, external_id="cc")
    figures = ("token_source", "used", "messages", "summary")
    assert {k: session_status(main)[k] for k in figures} == {k: session_status(reference.session)[k] for k in figures}
