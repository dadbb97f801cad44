"""The handoff document (``compaction.handoff``): the template of docs/COMPACTION.md ("Handoff") as text,
Markdown and data."""

from __future__ import annotations

import json

import pytest

from compaction.checkpoint import merge_checkpoint
from compaction.handoff import SECTIONS, Handoff, HandoffContext, continuation_prompt, render_handoff

RULE = "=" * 40

CHECKPOINT = merge_checkpoint(
    None,
    {
        "objective": "Ship the CSV importer",
        "completed": ["Parser written", "Tests for the parser", "Batch writes"],
        "in_progress": ["Resumable imports"],
        "pending": ["Wire the CLI", "Document the format"],
        "blockers": ["Lock timeout on batches over 500 rows"],
        "decisions": [
            {"decision": "Batches of 500", "rationale": "larger ones hit the lock timeout"},
            {"decision": "Keep SQLite for dev", "rationale": ""},
        ],
        "files_modified": [{"path": "importer/csv.py", "what": "new parser"}, {"path": "importer/cli.py", "what": ""}],
        "important_details": ["python manage.py import_csv data/2024.csv", "ADR-7"],
        "last_user_request": "Make the importer resumable, then stop.",
    },
    messages_compacted=120,
    oldest=None,
    newest=None,
    compacted_at="2025-03-01T12:00:00+00:00",
)

CTX = HandoffContext(
    project="Alpha",
    session_id=42,
    session_name="importer work",
    model="claude-sonnet-4-5",
    checkpoint_id=7,
    checkpoint_version=3,
    created_at="2025-03-01T12:05:00+00:00",
    base_url="https://ctx.example.com",
    usage_percent=96.4,
    recent_messages=("user: make it resumable", "assistant: on it"),
)


def section_lines(text: str, title: str) -> list[str]:
    """The lines under ``## title`` up to the next heading or rule, blank lines dropped."""
    lines = text.splitlines()
    start = lines.index(f"## {title}") + 1
    out = []
    for line in lines[start:]:
        if line.startswith("## ") or line == RULE:
            break
        if line.strip():
            out.append(line)
    return out


@pytest.fixture
def handoff() -> Handoff:
    return render_handoff(CHECKPOINT, CTX)


def test_the_header_names_project_time_session_and_checkpoint(handoff):
    assert handoff.text.splitlines()[:6] == [
        RULE,
        "HANDOFF DOCUMENT: Alpha",
        "Generated: 2025-03-01T12:05:00+00:00",
        "Session: 42",
        "Checkpoint: 7 (version 3)",
        RULE,
    ]


def test_every_section_of_the_template_appears_once_in_order(handoff):
    assert SECTIONS == (
        "CURRENT TASK",
        "USER MESSAGES",
        "TODO LIST",
        "COMPLETED",
        "IN PROGRESS",
        "NEXT STEPS",
        "FILES MODIFIED",
        "BLOCKING ISSUES",
        "DECISIONS MADE",
        "CONTEXT FOR CONTINUATION",
    )
    headings = [line[3:] for line in handoff.text.splitlines() if line.startswith("## ")]
    assert headings == list(SECTIONS)


def test_the_sections_carry_the_checkpoint(handoff):
    text = handoff.text
    # 3 done, 1 in progress + 2 pending open → 50 %.
    assert section_lines(text, "CURRENT TASK") == ["Ship the CSV importer (50% complete)"]
    assert section_lines(text, "COMPLETED") == ["- Parser written", "- Tests for the parser", "- Batch writes"]
    assert section_lines(text, "IN PROGRESS") == ["- Resumable imports"]
    assert section_lines(text, "NEXT STEPS") == ["1. Wire the CLI", "2. Document the format"]
    assert section_lines(text, "FILES MODIFIED") == ["- importer/csv.py: new parser", "- importer/cli.py"]
    assert section_lines(text, "BLOCKING ISSUES") == ["- Lock timeout on batches over 500 rows"]
    assert section_lines(text, "DECISIONS MADE") == [
        "- Batches of 500: larger ones hit the lock timeout",
        "- Keep SQLite for dev",
    ]


def test_the_context_for_continuation_says_where_the_session_stood(handoff):
    lines = section_lines(handoff.text, "CONTEXT FOR CONTINUATION")
    assert lines[0] == "Last user request (verbatim): Make the importer resumable, then stop."
    assert lines[1] == "Session 42 (importer work) on claude-sonnet-4-5 was at 96% of its context window."
    assert lines[2:] == [
        "Details kept verbatim:",
        "  python manage.py import_csv data/2024.csv",
        "  ADR-7",
        "Most recent messages:",
        "  user: make it resumable",
        "  assistant: on it",
    ]


def test_the_footer_says_how_to_resume(handoff):
    lines = handoff.text.rstrip("\n").splitlines()
    assert lines[-1] == RULE and lines[-4] == RULE
    assert lines[-3] == 'Resume: POST https://ctx.example.com/api/v1/sessions/42/handoff/ with {"continue": true}'
    assert lines[-2].strip() == "or: python manage.py ctx handoff 42 --continue"
    assert handoff.text.endswith("\n")


def test_an_empty_checkpoint_still_gives_every_section():
    handoff = render_handoff({}, CTX)
    text = handoff.text
    assert section_lines(text, "CURRENT TASK") == ["(not recorded) (0% complete)"]
    assert section_lines(text, "BLOCKING ISSUES") == ["None blocking"]
    assert section_lines(text, "NEXT STEPS") == ["(none recorded)"]
    for title in ("COMPLETED", "IN PROGRESS", "FILES MODIFIED", "DECISIONS MADE"):
        assert section_lines(text, title) == ["(none)"]
    context = section_lines(text, "CONTEXT FOR CONTINUATION")
    assert not any(line.startswith("Last user request") for line in context)
    assert handoff.data["progress_percent"] == 0


@pytest.mark.parametrize(
    ("completed", "open_", "percent"), [(0, 3, 0), (1, 2, 33), (2, 1, 67), (4, 0, 100), (1, 1, 50)]
)
def test_progress_is_the_share_of_items_done(completed, open_, percent):
    checkpoint = {"objective": "x", "completed": ["d"] * completed, "pending": ["p"] * open_}
    handoff = render_handoff(checkpoint, CTX)
    assert section_lines(handoff.text, "CURRENT TASK") == [f"x ({percent}% complete)"]
    assert handoff.data["progress_percent"] == percent


def test_the_markdown_has_the_same_sections_and_content(handoff):
    md = handoff.markdown
    lines = md.splitlines()
    assert lines[0] == "# Handoff: Alpha"
    assert "2025-03-01T12:05:00+00:00" in lines[2] and "session 42" in lines[2] and "checkpoint 7" in lines[2]
    headings = [line[3:] for line in lines if line.startswith("## ")]
    assert headings == [title.title() for title in SECTIONS]
    assert "1. Wire the CLI" in lines and "- importer/csv.py: new parser" in lines
    assert "- Batches of 500: larger ones hit the lock timeout" in lines
    assert "Ship the CSV importer (50% complete)" in lines
    assert any("/api/v1/sessions/42/handoff/" in line for line in lines[lines.index("---") :])
    empty = render_handoff({}, CTX).markdown
    assert "_None blocking_" in empty and "_(none recorded)_" in empty


def test_the_data_is_json_and_mirrors_the_text(handoff):
    data = json.loads(json.dumps(handoff.data))
    assert data["handoff"]["session_id"] == 42 and data["handoff"]["checkpoint_id"] == 7
    assert data["handoff"]["recent_messages"] == ["user: make it resumable", "assistant: on it"]
    assert data["progress_percent"] == 50
    assert data["checkpoint"]["version"] == 1 and data["checkpoint"]["objective"] == "Ship the CSV importer"
    assert list(data["sections"]) == list(SECTIONS)
    assert data["sections"]["NEXT STEPS"] == ["Wire the CLI", "Document the format"]


def test_rendering_is_deterministic():
    assert render_handoff(CHECKPOINT, CTX) == render_handoff(json.loads(json.dumps(CHECKPOINT)), CTX)


def test_the_continuation_prompt_carries_the_whole_document(handoff):
    prompt = continuation_prompt(handoff)
    assert prompt.endswith(handoff.text)
    intro = prompt[: -len(handoff.text)]
    assert "continues an earlier one" in intro and "NEXT STEPS" in intro


def test_the_facts_a_checkpoint_carries_are_in_the_document():
    facts = {
        "first_request": "Build the importer.\nStream it.",
        "user_messages": ["Keep the API.", "Use make test."],
        "user_messages_cut": 2,
        "todos": [{"content": "Wire the CLI", "status": "in_progress"}],
        "files_modified": [{"path": "importer/csv.py", "what": "Edit"}, {"path": "importer/bom.py", "what": "Write"}],
        "files_read": ["README.md"],
        "commands": [{"key": "bash:make test", "command": "make test", "ok": False}],
        "errors": [{"key": "bash:make test", "run": "make test", "lines": ["UnicodeDecodeError: byte 0xef"]}],
        "decisions": [],
        "current_work": "Switching the reader to utf-8-sig.",
    }
    text = render_handoff({**CHECKPOINT, "facts": facts}, CTX).text
    said = "\n".join(section_lines(text, "USER MESSAGES"))
    assert "Build the importer.\nStream it." in said and "Keep the API." in said and "2 older messages" in said
    assert section_lines(text, "TODO LIST") == ["- [in_progress] Wire the CLI"]
    files = section_lines(text, "FILES MODIFIED")
    assert "- importer/bom.py (Write)" in files and sum("importer/csv.py" in f for f in files) == 1
    assert "UnicodeDecodeError: byte 0xef" in "\n".join(section_lines(text, "BLOCKING ISSUES"))
    assert "Switching the reader to utf-8-sig." in "\n".join(section_lines(text, "CONTEXT FOR CONTINUATION"))


def test_the_last_three_pieces_of_prose_are_in_the_document_word_for_word():
    explanation = "The root cause is the BOM.\n  Next I'll switch the reader to utf-8-sig."
    facts = {
        "first_request": "Fix the importer.",
        "user_messages": ["Keep the API."],
        "current_work": explanation,
        "recent_prose": [
            {"seq": 3, "block": 0, "role": "user", "text": "Keep the API."},
            {"seq": 4, "block": 0, "role": "assistant", "text": "Looking at the reader."},
            {"seq": 9, "block": 1, "role": "assistant", "text": explanation},
        ],
    }
    handoff = render_handoff({**CHECKPOINT, "facts": facts}, CTX)
    for rendered in (handoff.text, handoff.markdown):
        assert explanation in rendered and "Looking at the reader." in rendered
        assert rendered.count(explanation) == 1, "the newest assistant text is not repeated as current work"
        assert rendered.count("Keep the API.") == 1 and "[user] (quoted above)" in rendered


def facts_with_decisions(*decisions: dict[str, str]) -> dict[str, object]:
    return {"first_request": "Build the importer.", "decisions": list(decisions)}


def test_decisions_marked_in_the_session_are_decisions_made_without_a_summarizers():
    checkpoint = {
        **CHECKPOINT,
        "decisions": [],
        "facts": facts_with_decisions({"decision": "Use utf-8-sig", "rationale": "BOMs"}),
    }
    assert section_lines(render_handoff(checkpoint, CTX).text, "DECISIONS MADE") == ["- Use utf-8-sig: BOMs"]
    assert "- Use utf-8-sig: BOMs" in render_handoff(checkpoint, CTX).markdown
    assert render_handoff(checkpoint, CTX).data["sections"]["DECISIONS MADE"] == ["Use utf-8-sig: BOMs"]


def test_a_decision_the_summarizer_and_the_facts_both_state_is_made_once():
    facts = facts_with_decisions(
        {"decision": "batches of 500", "rationale": "larger ones hit the lock timeout"},
        {"decision": "Keep  SQLite for dev.", "rationale": "no server on laptops"},
        {"decision": "ADR-7 use Celery", "rationale": ""},
    )
    made = section_lines(render_handoff({**CHECKPOINT, "facts": facts}, CTX).text, "DECISIONS MADE")
    assert made == [
        "- Batches of 500: larger ones hit the lock timeout",
        "- Keep SQLite for dev: no server on laptops",  # the summarizer's words, the session's reason
        "- ADR-7 use Celery",
    ]
