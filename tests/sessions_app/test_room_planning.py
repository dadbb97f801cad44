"""Room is planned (issue 30): a preset's budget bounds the whole checkpoint as STATUS counts it, the
user's words go before the summary, and a window too small for what must stay steps the run up to
handoff, said in STATUS — over every shared transcript in a window a third of its size."""

from __future__ import annotations

import pytest
from django.test.utils import override_settings

from compaction.checkpoint import render_summary_text
from sessions_app.models import STEP_UP_NOTE, AgentSession, Checkpoint, HandoffDocument
from sessions_app.selectors import model_context, usage
from sessions_app.services import compaction_runs, projects
from tests.sessions_app.test_newest_prose import FILES, ctx

pytestmark = pytest.mark.django_db


def imported_at_a_third(project_id: int, fmt: str, path) -> AgentSession:
    imported = ctx("import", str(path), "--format", fmt, "--project", str(project_id), "--no-auto")
    session = AgentSession.objects.get(pk=imported["session"])
    window = max(1, imported["status"]["used"] // 3)
    AgentSession.objects.filter(pk=session.pk).update(context_window_override=window)
    session.refresh_from_db()
    return session


@pytest.mark.data
@pytest.mark.parametrize(("fmt", "path"), FILES, ids=[p.name for _, p in FILES])
@override_settings(ANTHROPIC_API_KEY="")
def test_an_adk_checkpoint_stays_within_500_tokens_as_status_counts_it(shared_data, team, fmt, path):
    projects.policy_apply_preset(policy=team.project.policy, preset_name="adk")
    session = imported_at_a_third(team.project.pk, fmt, path)
    for level in ("summarize", "summarize"):  # a second checkpoint merges the first
        record = compaction_runs.compaction_request(session=session, level=level, user=None, trigger="manual")
        compaction_runs.compaction_run(record.pk)
        record.refresh_from_db()
        assert record.status in ("succeeded", "skipped", "failed"), record.error
        if record.status == "failed":
            assert "would not be smaller" in record.error or "Nothing to summarize" in record.error
        session.refresh_from_db()
        status = usage.session_status(session)
        assert status["summary"] <= 500, status
    checkpoint = model_context.current_checkpoint(session)
    if checkpoint is not None and checkpoint.data.get("cuts"):
        assert "Left out to fit the context window: " in render_summary_text(checkpoint.data)


@pytest.mark.data
@pytest.mark.parametrize(("fmt", "path"), FILES, ids=[p.name for _, p in FILES])
@override_settings(ANTHROPIC_API_KEY="")
def test_a_run_ends_at_its_target_or_steps_up_to_handoff_and_says_so(shared_data, team, fmt, path):
    session = imported_at_a_third(team.project.pk, fmt, path)
    target = team.project.policy.to_engine().target_after
    record = compaction_runs.compaction_request(session=session, level="summarize", user=None, trigger="auto")
    compaction_runs.compaction_run(record.pk)
    record.refresh_from_db()
    session.refresh_from_db()
    status = usage.session_status(session)
    said = [w for w in status["warnings"] if w.startswith(STEP_UP_NOTE)]
    if status["used"] <= target * status["context_window"]:
        assert not said and record.level == "summarize"
        return
    assert record.status == "succeeded" and record.level == "handoff", record.error
    [warning] = said
    assert f"{status['context_window']:,}-token window" in warning
    document = HandoffDocument.objects.get(session=session)
    assert f"(handoff document {document.pk})" in warning
    assert {"strategy": "handoff", "seq": None, "tokens_before": 0, "tokens_after": 0, "handoff": document.pk} in (
        record.items
    )
    # The user's words are never what made room for the summarizer's: a cut of them comes after all of its items.
    checkpoint = Checkpoint.objects.filter(compaction=record).first()
    cuts = checkpoint.data.get("cuts") or [] if checkpoint is not None else []
    if any(c.endswith("older user messages") for c in cuts):
        assert not any(checkpoint.data.get(name) for name in ("important_details", "completed", "blockers"))
