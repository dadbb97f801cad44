"""What a Claude Code transcript's lines say their responses used, read back from ctxweb: one
``ProviderRequest`` row per response (``source="transcript"``), through an import and through the
hook's uploads in any chunking. The expected figures come
from the JSONL itself, read here line by line, not through ctxweb's reader."""

from __future__ import annotations

import json
import random
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.transcripts import read_transcript
from sessions_app.models import AgentSession, Message, ProviderRequest, RequestSource
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

    # The newest response, when its reply ends the session, is the session's exact count: what its
    # model read (input + cache write + cache read), Claude Code's own figure for its context.
    status = session_status(result.session)
    newest_id, newest = list(responses_in(data).items())[-1]
    read = sum(newest["usage"].get(k, 0) for k in KINDS[:3])
    last = Message.objects.filter(session=result.session).order_by("-seq").first()
    if last is not None and last.role == "assistant" and (last.client_id or "").split("#")[0] == newest_id:
        if status["token_source"] == "exact":
            assert status["used"] == read
            assert result.session.exact_upto_seq == result.session.last_seq
        else:  # a figure far beyond what the file holds (a compaction agent's, which read a whole session)
            assert any(f"read {read:,} tokens" in w and "not believed" in w for w in status["warnings"])
            assert read > 4 * status["used"]
    else:
        assert status["token_source"] == "estimate"


def test_most_shared_transcripts_end_on_a_response_that_counts_them(shared_data, owner):
    """The branch above that asserts the exact figure is the common one: a Claude Code file ends on
    its last reply."""
    exact = 0
    for name in FILES:
        data = (shared_data / "claude_code" / name).read_bytes()
        project = _project(owner, f"ends {name}")
        result = importing.session_import(user=owner, project=project, transcript=read_transcript(data, "claude-code"))
        exact += session_status(result.session)["token_source"] == "exact"
    assert exact >= len(FILES) / 2


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


@pytest.mark.data
@pytest.mark.parametrize("name", ["primer_agent-a0294d5.jsonl", "sniffly_ba79134d.jsonl"])
def test_a_transcript_teaches_calibration_by_how_much_its_context_grew(shared_data, owner, name):
    """Not by its whole figure (the harness's prompt and tools, which the file lacks, would pass for
    the tokenizer's error): by what the model read more at the last response than at the first, against
    ctxweb's estimate of the messages in between."""
    from django.core.cache import cache

    from sessions_app.models import ModelProfile
    from sessions_app.selectors.usage import model_info

    cache.clear()
    data = (shared_data / "claude_code" / name).read_bytes()
    transcript = read_transcript(data, "claude-code")
    profile_name = model_info(transcript.conversations[0].model or "").name
    before = ModelProfile.objects.get(name=profile_name)
    result = importing.session_import(user=owner, project=_project(owner, name), transcript=transcript)

    reads = {rid: sum(r["usage"].get(k, 0) for k in KINDS[:3]) for rid, r in responses_in(data).items()}
    replies = [m for m in Message.objects.filter(session=result.session).order_by("seq") if m.role == "assistant"]
    counted = [m for m in replies if (m.client_id or "").split("#")[0] in reads]
    first, last = counted[0], counted[-1]
    assert last.seq == result.session.last_seq
    grew = sum(m.tokens for m in Message.objects.filter(session=result.session, seq__gte=first.seq, seq__lt=last.seq))
    ratio = (reads[last.client_id.split("#")[0]] - reads[first.client_id.split("#")[0]]) / grew
    whole = reads[last.client_id.split("#")[0]] / sum(m.tokens for m in Message.objects.filter(session=result.session))
    assert 1.0 < ratio < 1.6 < whole  # the growth looks like a tokenizer's difference; the whole figure doesn't

    after = ModelProfile.objects.get(name=profile_name)
    assert after.calibration_samples == before.calibration_samples + 1
    assert abs(after.calibration_factor - ratio) < abs(before.calibration_factor - ratio)
    assert min(before.calibration_factor, ratio) <= after.calibration_factor <= max(before.calibration_factor, ratio)


@pytest.mark.data
def test_the_estimate_between_counts_includes_the_harness_the_file_lacks(shared_data, owner):
    """Where a counted reply ends a file, the estimate STATUS gives once that count lapses (the next
    message, a compaction) is near it: the harness (the agent's prompt and tools, which no transcript
    holds), worked out from the first response, is in it. Without it, a third of the count."""
    import statistics

    shipped, bare = [], []
    for name in FILES:
        data = (shared_data / "claude_code" / name).read_bytes()
        session = importing.session_import(
            user=owner, project=_project(owner, f"estimate {name}"), transcript=read_transcript(data, "claude-code")
        ).session
        status = session_status(session)
        if status["token_source"] != "exact":
            continue
        assert status["system_prompt"] > 0  # the harness, in the prompt's part
        AgentSession.objects.filter(pk=session.pk).update(exact_upto_seq=None)
        shipped.append(session_status(AgentSession.objects.get(pk=session.pk))["used"] / status["used"])
        AgentSession.objects.filter(pk=session.pk).update(harness_read_tokens=None)
        bare.append(session_status(AgentSession.objects.get(pk=session.pk))["used"] / status["used"])
    assert len(shipped) >= len(FILES) / 2
    assert 0.95 <= statistics.median(shipped) <= 1.08 and min(shipped) >= 0.8 and max(shipped) <= 1.5
    assert statistics.median(bare) < 0.6


def test_a_response_is_priced_at_its_days_price(owner):
    """The package's prices change over time (claude-opus-4-6's long-context rate above 200,000 input
    tokens ends on 2026-03-13): a response a transcript dates before the change costs the old price,
    one after it the new, as the package itself prices them at those times."""
    import genai_prices

    model, usage = "claude-opus-4-6", {"input_tokens": 150_000, "cache_creation_input_tokens": 300,
                                       "cache_read_input_tokens": 60_000, "output_tokens": 700}  # fmt: skip
    lines, parent = [], None
    for n, stamp in enumerate(("2026-03-01T10:00:00Z", "2026-04-01T10:00:00Z")):
        prompt = {"type": "user", "uuid": f"u{n}", "parentUuid": parent, "sessionId": "s", "timestamp": stamp,
                  "message": {"role": "user", "content": f"Step {n}?"}}  # fmt: skip
        reply = {"type": "assistant", "uuid": f"a{n}", "parentUuid": f"u{n}", "sessionId": "s", "timestamp": stamp,
                 "message": {"id": f"msg_{n}", "role": "assistant", "model": model, "usage": usage,
                             "content": [{"type": "text", "text": f"Done {n}."}]}}  # fmt: skip
        lines += [json.dumps(prompt), json.dumps(reply)]
        parent = f"a{n}"
    data = ("\n".join(lines) + "\n").encode()
    project = _project(owner, "dated prices")
    importing.session_import(user=owner, project=project, transcript=read_transcript(data, "claude-code"))

    rows = list(ProviderRequest.objects.filter(project=project).order_by("created_at"))
    expected = []
    for row in rows:
        package = genai_prices.Usage(
            input_tokens=sum(usage[k] for k in KINDS[:3]),
            cache_write_tokens=usage["cache_creation_input_tokens"],
            cache_read_tokens=usage["cache_read_input_tokens"],
            output_tokens=usage["output_tokens"],
        )
        expected.append(
            genai_prices.calc_price(
                package, model, provider_id="anthropic", genai_request_timestamp=row.created_at
            ).total_price
        )
    assert expected[0] != expected[1]  # the price did change between the two days
    assert [r.cost_usd.quantize(Decimal("1e-9")) for r in rows] == [e.quantize(Decimal("1e-9")) for e in expected]
