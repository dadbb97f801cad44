import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.model_catalog import (
    CLAUDE_CALIBRATION,
    FALLBACK_CONTEXT_WINDOW,
    best_match,
    canonical_model_name,
    spec_for,
)
from compaction.policy import PRESETS, Policy, level_for, validate
from compaction.types import Level, level_choices
from compaction.usage import compute_usage, recommendation, render_bar
from tests.hypothesis_budget import ENGINE


def test_presets_carry_the_numbers_in_docs_policies():
    adk, kai, gsd, brain = PRESETS["adk"], PRESETS["kai"], PRESETS["gsd"], PRESETS["brainchain"]
    assert (adk.compact, adk.summarize, adk.handoff, adk.summary_budget, adk.revert_hours, adk.prune_days) == (
        0.70,
        0.85,
        0.95,
        500,
        24,
        30,
    )
    assert (kai.summarize, kai.output_reserve, kai.tail_fraction) == (0.65, 0.15, 0.30)
    assert gsd.summarize == 0.90
    assert (brain.remind, brain.compact, brain.handoff, brain.keep_recent_messages) == (0.70, 0.85, 0.95, 10)
    assert "default" in PRESETS


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_is_valid(name):
    assert validate(PRESETS[name].as_dict()) == {}


def test_validation_names_the_field():
    values = Policy().as_dict() | {"compact": 0.9, "summarize": 0.8}
    assert set(validate(values)) == {"summarize"}
    assert "at least the compact" in validate(values)["summarize"]
    assert set(validate(Policy().as_dict() | {"remind": 0})) == {"remind"}
    assert set(validate(Policy().as_dict() | {"handoff": 1.2})) == {"handoff"}
    assert set(validate(Policy().as_dict() | {"output_reserve": 0.6})) == {"output_reserve"}
    assert set(validate(Policy().as_dict() | {"summary_budget": 5})) == {"summary_budget"}


@pytest.mark.parametrize(
    ("fraction", "level"),
    [
        (0.0, Level.OK),
        (0.59, Level.OK),
        (0.60, Level.REMIND),
        (0.70, Level.COMPACT),
        (0.849, Level.COMPACT),
        (0.85, Level.SUMMARIZE),
        (0.95, Level.HANDOFF),
        (1.3, Level.HANDOFF),
    ],
)
def test_levels(fraction, level):
    assert level_for(fraction, Policy().thresholds) is level


def test_levels_are_ordered():
    assert Level.OK < Level.REMIND < Level.COMPACT < Level.SUMMARIZE < Level.HANDOFF
    assert Level.SUMMARIZE >= Level.COMPACT


def test_a_compaction_runs_at_the_three_upper_levels():
    assert level_choices() == [("compact", "Compact"), ("summarize", "Summarize"), ("handoff", "Handoff")]


def test_usage_breakdown_adds_up_and_reserves_output():
    usage = compute_usage(
        model="m",
        context_window=100_000,
        system_prompt=1_000,
        tool_definitions=2_000,
        messages=64_500,
        summary=500,
        policy=PRESETS["kai"],
    )
    assert usage.used == 68_000
    assert usage.reserved_output == 15_000
    assert usage.free == 100_000 - 68_000 - 15_000
    assert usage.level is Level.SUMMARIZE
    assert "68%" in recommendation(usage)
    bar = render_bar(usage)
    assert "68.0k/100.0k" in bar and "Free space" in bar and bar.count("⛁ ") >= 6


def test_model_names_resolve_by_prefix_and_fall_back():
    assert canonical_model_name("anthropic/claude-3.5-sonnet") == "claude-3-5-sonnet"
    assert spec_for("claude-sonnet-4-5-20250929").name == "claude-sonnet-4-5"
    assert spec_for("claude-sonnet-4-20250514").name == "claude-sonnet-4-0"  # the package's id
    assert spec_for("gpt-4o-mini-2024-07-18").name == "gpt-4o-mini"
    assert best_match("gpt-4o-2024-08-06", ["gpt-4", "gpt-4o"]) == "gpt-4o"
    assert spec_for("some-local-llama") is None
    assert FALLBACK_CONTEXT_WINDOW == 128_000


@pytest.mark.parametrize(
    ("name", "window", "calibration"),
    [
        ("claude-opus", 200_000, CLAUDE_CALIBRATION),
        ("claude-sonnet", 200_000, CLAUDE_CALIBRATION),
        ("claude-haiku", 200_000, CLAUDE_CALIBRATION),
        ("anthropic/claude-sonnet-5", 1_000_000, CLAUDE_CALIBRATION),  # the package knows it
        ("claude-sonnet-9", 200_000, CLAUDE_CALIBRATION),  # the package does not: the family's
        ("gpt-5.2", 400_000, 1.0),
        ("gpt-5.1-codex", 400_000, 1.0),
        ("gpt-4.1-nano", 1_000_000, 1.0),
        ("o3-pro", 200_000, 1.0),
    ],
)
def test_a_bare_or_newer_name_of_a_known_family_gets_the_family_window(name, window, calibration):
    spec = spec_for(name)
    assert spec is not None and (spec.context_window, spec.calibration) == (window, calibration)


@pytest.mark.parametrize("name", ["claudette", "gpt-50", "gpt-4.10", "o30", "my-local-llama", "llama-claude"])
def test_names_that_only_look_like_a_family_stay_unknown(name):
    assert spec_for(name) is None


def test_preserve_patterns_that_would_crash_or_backtrack_are_refused():
    from compaction.policy import PRESETS, validate

    base = PRESETS["default"].as_dict()
    for pattern in ("a{4294967296}", "(a+)+$", "(x*)*", "(ab|c+)+", "(?:a{2,})+"):
        assert "preserve_patterns" in validate({**base, "preserve_patterns": [pattern]}), pattern
    for pattern in (r"^## Decision:", r"^ADR-\d+", "error|fail|critical", "(foo)+", r"\(a+\)+"):
        assert "preserve_patterns" not in validate({**base, "preserve_patterns": [pattern]}), pattern


def test_the_newest_three_turns_are_protected_as_a_model_sees_turns():
    """Parallel tool results are stored one message each but are one turn to the model."""
    policy = Policy(keep_recent_messages=0)
    assert policy.protected_count(["user", "assistant", "user", "assistant"]) == 3
    parallel = ["user", "assistant", "user", "user", "user", "assistant"]
    assert policy.protected_count(parallel) == 5, "the three results are one turn"
    assert policy.protected_count(["user", "tool", "tool"]) == 3
    assert policy.protected_count([]) == 0
    assert Policy(keep_recent_messages=10).protected_count(parallel) == 10


@pytest.mark.parametrize(
    ("provider", "model", "problem"),
    [
        ("anthropic", "claude-haiku-4-5", None),
        ("anthropic", "claude-sonnet-4-5-20250929", None),  # a dated version
        ("openai", "gpt-4o-mini", None),
        ("openai", "gpt-5.1", None),  # a newer member of a known family
        ("openai", "o4-mini", None),
        ("offline", "", None),  # no model to name
        ("openai", "claude-haiku-4-5", "summarizer_model"),
        ("anthropic", "gpt-4o", "summarizer_model"),
        ("openai", "", "summarizer_model"),
        ("openai", "llama-3-70b", "summarizer_model"),
        ("google", "gemini-2.5-flash", "summarizer_provider"),
    ],
)
def test_the_summarizer_is_a_model_of_its_provider(provider, model, problem):
    values = {**Policy().as_dict(), "summarizer_provider": provider, "summarizer_model": model}
    errors = validate(values)
    assert set(errors) == ({problem} if problem else set()), errors


def test_the_default_summarizer_is_anthropics_small_model():
    assert (Policy().summarizer_provider, Policy().summarizer_model) == ("anthropic", "claude-haiku-4-5")
    assert all(validate(p.as_dict()) == {} for p in PRESETS.values())


@ENGINE
@given(
    provider=st.one_of(
        st.sampled_from(["anthropic", "openai", "offline"]), st.text(max_size=12), st.integers(), st.lists(st.text())
    ),
    model=st.one_of(st.text(max_size=60), st.sampled_from(["gpt-4o", "claude-opus-4-5", "o3", " GPT-4o "]), st.none()),
)
def test_property_any_summarizer_choice_is_judged_never_raised(provider, model):
    errors = validate({**Policy().as_dict(), "summarizer_provider": provider, "summarizer_model": model})
    assert set(errors) <= {"summarizer_provider", "summarizer_model"}
    if not isinstance(provider, str) or provider not in ("anthropic", "openai", "offline"):
        assert set(errors) == {"summarizer_provider"}
    elif provider == "offline" or not isinstance(model, str):
        assert errors == {}
    else:
        spec = spec_for(model) if model.strip() else None
        assert ("summarizer_model" in errors) == (spec is None or spec.provider != provider)
