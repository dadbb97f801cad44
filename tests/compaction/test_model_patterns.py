"""ModelProfile names that are patterns (``claude-sonnet-*``): how a model name picks its row, and
which patterns are refused."""

from __future__ import annotations

import pytest

from compaction.model_catalog import profile_match, profile_name_problem

ROWS = ("claude-sonnet-4-5", "claude-sonnet-*", "claude-*", "claude-sonnet-4-5-2025*", "local-llama*", "gpt-4o")


@pytest.mark.parametrize(
    ("model", "row"),
    [
        ("claude-sonnet-4-5", "claude-sonnet-4-5"),  # an exact name wins over every pattern
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5-2025*"),  # the longest match wins
        ("claude-sonnet-4-5-20260101", "claude-sonnet-4-5"),  # a dated version of a named row…
        ("claude-sonnet-5", "claude-sonnet-*"),  # …and a newer model of the family
        ("Anthropic/Claude-Opus-4.6", "claude-*"),  # compared as canonical names
        ("local-llama-3-70b", "local-llama*"),  # a plain prefix: no dash needed
        ("local-llamas", "local-llama*"),
        ("gpt-4o-2024-08-06", "gpt-4o"),
        ("gpt-5", None),
        ("llama", None),
    ],
)
def test_a_model_takes_the_most_specific_row(model, row):
    assert profile_match(model, ROWS) == row


def test_a_named_row_wins_a_tie_with_a_pattern_of_its_length():
    rows = ("claude-sonnet-4-5*", "claude-sonnet-4-5")
    assert profile_match("claude-sonnet-4-5-20250929", rows) == "claude-sonnet-4-5"


@pytest.mark.parametrize("name", ["claude-sonnet-4-5", "claude-sonnet-*", "gpt-5*", "local-llama*"])
def test_names_and_patterns_that_can_match(name):
    assert profile_name_problem(name) == ""


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("*", "needs a prefix"),
        ("anthropic/*", "needs a prefix"),
        ("claude-*-4-5", "one * at the end"),
        ("claude-**", "one * at the end"),
        ("Claude-Sonnet-*", "'claude-sonnet-*'"),
        ("claude-3.5-*", "'claude-3-5-*'"),
        ("anthropic/claude-*", "'claude-*'"),
    ],
)
def test_patterns_that_could_never_match_are_refused(name, problem):
    assert problem in profile_name_problem(name)
