"""A decision marked in a session (``## Decision:``) is under DECISIONS MADE in its handoff, whether the
offline summarizer or a model wrote the checkpoint, and once when the model states it too."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from django.core.management import call_command

from sessions_app.models import Checkpoint
from sessions_app.services import handoffs
from sessions_app.web.pages import checkpoint_sections
from tests.fakes.anthropic_server import FakeAnthropic
from tests.sessions_app.compaction_helpers import append

pytestmark = pytest.mark.django_db

MARKED = "## Decision: read CSV files with utf-8-sig because exports from Excel carry a BOM"
MADE = "- read CSV files with utf-8-sig: exports from Excel carry a BOM"


def conversation() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "The importer crashes on files with a BOM. Fix it."},
        {"role": "assistant", "content": f"Looked at importer/csv.py.\n{MARKED}\nChanging the reader now."},
        {"role": "user", "content": "Go ahead."},
        {"role": "assistant", "content": "Done: the reader opens files with utf-8-sig."},
    ]


def decisions_made(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("## DECISIONS MADE") + 1
    return [line for line in lines[start : lines.index("## CONTEXT FOR CONTINUATION")] if line.strip()]


def model_reply(decisions: list[dict[str, str]]):
    def reply(body: Any) -> str:
        return json.dumps(
            {"objective": "Fix the BOM crash", "narrative": "Changed the reader.", "decisions": decisions}
        )

    return reply


@pytest.fixture(params=["offline", "model-silent", "model-same"])
def summarizer(request, settings):
    if request.param == "offline":
        settings.ANTHROPIC_API_KEY = ""
        yield request.param
        return
    said = [] if request.param == "model-silent" else [{"decision": "Read CSV files with utf-8-sig.", "rationale": ""}]
    with FakeAnthropic() as server:
        server.set_reply_function(model_reply(said))
        settings.ANTHROPIC_API_KEY = "test-key"
        settings.ANTHROPIC_BASE_URL = server.base_url
        settings.ANTHROPIC_MAX_RETRIES = 0
        yield request.param


def test_the_handoff_service_lists_a_marked_decision(session_of, summarizer):
    session = session_of(name="bom")
    append(session, conversation())
    document = handoffs.handoff_create(session=session, user=None)
    if summarizer == "model-same":  # the model's words, the reason the session gave
        assert decisions_made(document.text) == ["- Read CSV files with utf-8-sig.: exports from Excel carry a BOM"]
    else:
        assert decisions_made(document.text) == [MADE]
    assert "(none)" not in decisions_made(document.text)
    assert document.checkpoint.data["facts"]["decisions"]  # the checkpoint carries it too
    # The marked line is said once as written: among the newest prose kept verbatim (its decision reads
    # "…: reason" under Decisions), not again in a facts block.
    assert document.checkpoint.data["summary_text"].count("utf-8-sig because") == 1
    assert "exports from Excel carry a BOM" in document.checkpoint.data["summary_text"]


def test_ctx_handoff_prints_a_marked_decision_under_decisions_made(session_of, summarizer):
    session = session_of(name="bom", external_id="ext-bom")
    append(session, conversation())
    out = io.StringIO()
    call_command("ctx", "handoff", "ext-bom", stdout=out)
    made = decisions_made(out.getvalue())
    assert len(made) == 1 and "utf-8-sig" in made[0] and made[0].endswith("exports from Excel carry a BOM")


def test_the_session_page_lists_a_marked_decision_beside_the_summarizers_once():
    data = {
        "objective": "Fix the BOM crash",
        "decisions": [{"decision": "Keep the legacy loader", "rationale": ""}],
        "facts": {
            "decisions": [
                {"decision": "keep the legacy loader.", "rationale": "two customers use it"},
                {"decision": "read CSV files with utf-8-sig", "rationale": "exports from Excel carry a BOM"},
            ]
        },
    }
    sections = dict(checkpoint_sections(Checkpoint(data=data)))
    assert sections["Decisions"] == [
        "Keep the legacy loader — two customers use it",
        "read CSV files with utf-8-sig — exports from Excel carry a BOM",
    ]
