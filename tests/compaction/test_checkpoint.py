"""The checkpoint schema (``compaction.checkpoint``): validation, parsing a model's reply, merging, rendering."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.checkpoint import (
    CHECKPOINT_FIELDS,
    MAX_ITEMS,
    CheckpointError,
    checkpoint_decisions,
    merge_checkpoint,
    parse_json_object,
    render_summary_text,
    validate_fields,
)
from compaction.errors import EngineError

FULL = {
    "objective": "Ship the CSV importer",
    "completed": ["Parser written", "Tests for the parser"],
    "in_progress": ["Batch writes"],
    "pending": ["Wire the CLI", "Document the format"],
    "blockers": ["Lock timeout on batches over 500 rows"],
    "decisions": [{"decision": "Batches of 500", "rationale": "larger ones hit the lock timeout"}],
    "files_modified": [{"path": "importer/csv.py", "what": "new parser"}],
    "important_details": ["python manage.py import_csv data/2024.csv"],
    "last_user_request": "Make the importer resumable.",
    "narrative": "Wrote the parser first because the format decides the rest.",
}


def test_the_fields_are_a_summarys_plus_what_a_handoff_needs():
    assert CHECKPOINT_FIELDS == (
        "objective",
        "completed",
        "in_progress",
        "pending",
        "blockers",
        "decisions",
        "files_modified",
        "important_details",
        "last_user_request",
        "narrative",
    )


def test_a_complete_checkpoint_validates_to_itself():
    assert validate_fields(FULL) == FULL


def test_validation_returns_exactly_the_checkpoint_fields():
    out = validate_fields({"objective": "x", "mood": "happy", "version": 7})
    assert tuple(out) == CHECKPOINT_FIELDS
    assert out == {
        "objective": "x",
        "completed": [],
        "in_progress": [],
        "pending": [],
        "blockers": [],
        "decisions": [],
        "files_modified": [],
        "important_details": [],
        "last_user_request": "",
        "narrative": "",
    }


def test_validation_is_lenient_where_the_meaning_is_plain():
    out = validate_fields(
        {
            "objective": "  Ship it  ",
            "completed": ["  done one ", "", "   ", None, 42, {"step": "migrate", "note": None}],
            "pending": None,
            "decisions": [
                "Use Postgres",
                {"what": "Use Celery", "why": "the LLM call is slow"},
                {"title": "Keep SQLite for dev"},
                {"decision": "", "rationale": "dropped: no decision"},
            ],
            "files_modified": ["app/models.py", {"file": "app/views.py", "description": "new view"}, {"what": "x"}],
            "last_user_request": None,
        }
    )
    assert out["objective"] == "Ship it"
    assert out["completed"] == ["done one", "42", "step: migrate"]
    assert out["pending"] == []
    assert out["decisions"] == [
        {"decision": "Use Postgres", "rationale": ""},
        {"decision": "Use Celery", "rationale": "the LLM call is slow"},
        {"decision": "Keep SQLite for dev", "rationale": ""},
    ]
    assert out["files_modified"] == [
        {"path": "app/models.py", "what": ""},
        {"path": "app/views.py", "what": "new view"},
    ]
    assert out["last_user_request"] == ""


def test_lists_are_capped():
    out = validate_fields({"objective": "x", "completed": [f"item {i}" for i in range(MAX_ITEMS + 50)]})
    assert out["completed"] == [f"item {i}" for i in range(MAX_ITEMS)]


@pytest.mark.parametrize(
    ("raw", "named"),
    [
        ({"completed": ["x"]}, "'objective' is missing or empty"),
        ({"objective": "   "}, "'objective' is missing or empty"),
        ({"objective": ["a list"]}, "'objective' must be a string"),
        ({"objective": "x", "completed": "one thing"}, "'completed' must be a list"),
        ({"objective": "x", "blockers": {"a": 1}}, "'blockers' must be a list"),
        ({"objective": "x", "decisions": "use X"}, "'decisions' must be a list"),
        ({"objective": "x", "files_modified": "a.py"}, "'files_modified' must be a list"),
        ({"objective": "x", "last_user_request": 3}, "'last_user_request' must be a string"),
    ],
)
def test_validation_is_strict_where_the_meaning_is_not(raw, named):
    with pytest.raises(CheckpointError) as info:
        validate_fields(raw)
    assert named in str(info.value)
    assert isinstance(info.value, EngineError)
    assert info.value.permanent is True and info.value.code == "invalid_summary"


def test_every_problem_is_reported_at_once():
    with pytest.raises(CheckpointError) as info:
        validate_fields({"completed": "x", "pending": 1})
    message = str(info.value)
    assert "'objective'" in message and "'completed'" in message and "'pending'" in message


@pytest.mark.parametrize("raw", [None, "objective", ["objective"], 3])
def test_a_checkpoint_is_an_object(raw):
    with pytest.raises(CheckpointError):
        validate_fields(raw)


# ----------------------------------------------------------------------------- parsing a reply


@pytest.mark.parametrize(
    "reply",
    [
        json.dumps(FULL),
        "```json\n" + json.dumps(FULL, indent=2) + "\n```",
        "```\n" + json.dumps(FULL) + "\n```",
        "Here is the checkpoint you asked for:\n\n" + json.dumps(FULL) + "\n\nLet me know if anything is missing.",
        "Notes {draft}\n```json\n" + json.dumps(FULL) + "\n```\nThat is all {really}.",
    ],
    ids=["bare", "fenced", "fenced-no-language", "words-around", "braces-outside-the-fence"],
)
def test_the_json_object_is_found_in_a_reply(reply):
    assert parse_json_object(reply) == FULL


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ("I could not summarize this conversation.", "no JSON object"),
        ("", "no JSON object"),
        ("} backwards {", "no JSON object"),
        ('{"objective": "x", "completed": [1, 2,]}', "not valid JSON"),
        ('{"objective": "x"', "no JSON object"),
    ],
)
def test_a_reply_without_a_valid_object_is_a_checkpoint_error(reply, says):
    with pytest.raises(CheckpointError) as info:
        parse_json_object(reply)
    assert says in str(info.value)
    assert info.value.permanent is True


@pytest.mark.parametrize("fenced", [False, True])
def test_a_code_fence_inside_a_string_value_does_not_break_parsing(fenced):
    value = {"objective": "x", "important_details": ["run ```bash\nmake test\n``` before pushing"]}
    reply = json.dumps(value)
    if fenced:
        reply = f"```json\n{reply}\n```"
    assert parse_json_object(reply) == value


NO_BACKTICKS = st.text(alphabet=st.characters(blacklist_characters="`"), max_size=20)


@given(st.dictionaries(NO_BACKTICKS, st.one_of(NO_BACKTICKS, st.integers(), st.none()), max_size=6))
def test_any_object_survives_a_round_trip_through_a_chatty_reply(value):
    reply = f"Sure! Here you go:\n```json\n{json.dumps(value, ensure_ascii=False)}\n```\nAnything else?"
    assert parse_json_object(reply) == value


# ----------------------------------------------------------------------------- merge


def test_the_first_merge_is_version_one_with_its_bookkeeping():
    checkpoint = merge_checkpoint(
        None,
        FULL,
        messages_compacted=40,
        oldest="2025-01-01T10:00:00+00:00",
        newest="2025-01-01T11:30:00+00:00",
        compacted_at="2025-01-01T12:00:00+00:00",
    )
    assert {k: checkpoint[k] for k in CHECKPOINT_FIELDS} == FULL
    assert checkpoint["version"] == 1
    assert checkpoint["lossy"] is True
    assert checkpoint["compaction_info"] == {
        "messages_compacted": 40,
        "oldest_message_at": "2025-01-01T10:00:00+00:00",
        "newest_message_at": "2025-01-01T11:30:00+00:00",
        "compacted_at": "2025-01-01T12:00:00+00:00",
    }
    assert checkpoint["stats"] == {"total_compactions": 1, "total_messages": 40}


def test_a_later_merge_bumps_the_version_and_adds_to_the_totals():
    first = merge_checkpoint(None, FULL, messages_compacted=40, oldest=None, newest=None, compacted_at="t1")
    second = merge_checkpoint(
        first,
        {**FULL, "completed": [*FULL["completed"], "Batch writes"], "in_progress": []},
        messages_compacted=25,
        oldest="a",
        newest="b",
        compacted_at="t2",
    )
    assert second["version"] == 2
    assert second["stats"] == {"total_compactions": 2, "total_messages": 65}
    assert second["compaction_info"]["messages_compacted"] == 25
    assert second["compaction_info"]["compacted_at"] == "t2"
    # The summarizer already merged the content: the new fields replace the old ones.
    assert second["completed"][-1] == "Batch writes" and second["in_progress"] == []
    third = merge_checkpoint(second, FULL, messages_compacted=5, oldest=None, newest=None, compacted_at="t3")
    assert (third["version"], third["stats"]["total_messages"]) == (3, 70)


def test_a_merge_tolerates_a_previous_checkpoint_without_bookkeeping():
    merged = merge_checkpoint(
        {"objective": "old", "version": None}, FULL, messages_compacted=3, oldest=None, newest=None, compacted_at="t"
    )
    assert merged["version"] == 1 and merged["stats"] == {"total_compactions": 1, "total_messages": 3}


def test_a_merge_validates_the_fields():
    with pytest.raises(CheckpointError):
        merge_checkpoint(None, {"completed": ["x"]}, messages_compacted=1, oldest=None, newest=None, compacted_at="t")


# ----------------------------------------------------------------------------- rendering


def test_the_summary_text_is_labelled_and_says_it_is_lossy():
    checkpoint = merge_checkpoint(None, FULL, messages_compacted=40, oldest=None, newest=None, compacted_at="t")
    text = render_summary_text(checkpoint)
    lines = text.splitlines()
    assert lines[0].startswith("Summary of 40 earlier messages (lossy")
    assert "Objective: Ship the CSV importer" in lines
    for title, items in (
        ("Completed:", FULL["completed"]),
        ("In progress:", FULL["in_progress"]),
        ("Next steps:", FULL["pending"]),
        ("Blockers:", FULL["blockers"]),
        ("Details kept verbatim:", FULL["important_details"]),
    ):
        start = lines.index(title)
        assert lines[start + 1 : start + 1 + len(items)] == [f"- {item}" for item in items]
    assert "- Batches of 500 (why: larger ones hit the lock timeout)" in lines
    assert "- importer/csv.py: new parser" in lines
    assert lines[-1] == "Last user request: Make the importer resumable."


def test_a_narrative_is_rendered_verbatim_right_after_the_objective():
    story = "Analysis:\n1. The user asked for a CSV importer.\n\nSummary:\n- parser done, CLI next"
    checkpoint = validate_fields({**FULL, "narrative": f"  {story}\n"})
    assert checkpoint["narrative"] == story
    lines = render_summary_text(checkpoint).splitlines()
    at, told = lines.index("Objective: Ship the CSV importer"), story.splitlines()
    assert lines[at + 1 : at + 2 + len(told)] == ["Summary:", *told]
    assert lines[at + 2 + len(told)] == "Completed:"


def test_a_narrative_is_optional_and_must_be_text():
    assert validate_fields({"objective": "x"})["narrative"] == ""
    assert "Summary:" not in render_summary_text(validate_fields({"objective": "x", "narrative": None}))
    with pytest.raises(CheckpointError, match="'narrative' must be a string"):
        validate_fields({"objective": "x", "narrative": ["not", "text"]})


def test_empty_sections_are_left_out():
    text = render_summary_text(validate_fields({"objective": "Only this", "files_modified": ["a.py"]}))
    assert "Completed:" not in text and "Blockers:" not in text and "Decisions:" not in text
    assert "Files modified:\n- a.py" in text
    assert text.startswith("Summary of the earlier messages (lossy")


def test_running_totals_are_what_the_summary_counts():
    first = merge_checkpoint(None, FULL, messages_compacted=40, oldest=None, newest=None, compacted_at="t1")
    second = merge_checkpoint(first, FULL, messages_compacted=25, oldest=None, newest=None, compacted_at="t2")
    assert render_summary_text(second).startswith("Summary of 65 earlier messages")


def test_the_checkpoint_states_the_facts_decisions_beside_the_summarizers_once():
    facts = {
        "first_request": "Ship it",
        "decisions": [
            {"decision": "Batches of 500", "rationale": "larger ones hit the lock timeout"},
            {"decision": "Use utf-8-sig", "rationale": "files carry a BOM"},
        ],
    }
    checkpoint = merge_checkpoint(
        None, FULL, messages_compacted=3, oldest=None, newest=None, compacted_at="t", facts=facts
    )
    assert checkpoint_decisions(checkpoint) == [
        {"decision": "Batches of 500", "rationale": "larger ones hit the lock timeout"},
        {"decision": "Use utf-8-sig", "rationale": "files carry a BOM"},
    ]
    text = render_summary_text(checkpoint)
    assert text.count("Batches of 500") == 1 and text.count("Use utf-8-sig") == 1
    lines = text.splitlines()
    assert lines[lines.index("Decisions:") + 2] == "- Use utf-8-sig (why: files carry a BOM)"
    assert "Recorded from the session, verbatim:" in text  # the other facts still are
    only_decisions = {**checkpoint, "facts": {"decisions": facts["decisions"]}}
    assert "Recorded from the session" not in render_summary_text(only_decisions)
