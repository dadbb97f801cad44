"""Migration 0008 moves policies still named after a preset to its new settings, keeps what was
edited, and gives every policy a target above 0 and below its own compact threshold."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as django_apps

from compaction.policy import validate
from sessions_app.models import CompactionPolicy
from sessions_app.services import projects

pytestmark = pytest.mark.django_db

step = importlib.import_module("sessions_app.migrations.0008_policy_target_continue")


def policy_with(team, **values) -> CompactionPolicy:
    project = projects.project_create(user=team.alice.user, name=f"p{CompactionPolicy.objects.count()}")
    CompactionPolicy.objects.filter(project=project).update(**values)
    return CompactionPolicy.objects.get(project=project)


def test_named_presets_move_and_edits_stay(team):
    untouched = policy_with(
        team, preset="kai", compact=0.65, summarize=0.65, tail_fraction=0.30, keep_recent_messages=6
    )
    edited = policy_with(team, preset="default", keep_recent_messages=40, tail_fraction=0.45)
    brain = policy_with(team, preset="brainchain", compact=0.85, keep_recent_messages=10, tail_fraction=0.30)
    tiny = policy_with(team, preset="custom", remind=0.005, compact=0.005, summarize=0.5, target_after=0.5)
    odd = policy_with(team, preset="default", remind=0.3, compact=0.4, target_after=0.5)
    step.presets_forward(django_apps, None)
    for policy in (untouched, edited, brain, tiny, odd):
        policy.refresh_from_db()
        assert 0 < policy.target_after < policy.compact, policy.preset
        assert "target_after" not in validate({f: getattr(policy, f) for f in CompactionPolicy.ENGINE_FIELDS})
    assert (untouched.keep_recent_messages, untouched.tail_fraction, untouched.reversible_first) == (0, 0.30, False)
    assert (edited.keep_recent_messages, edited.tail_fraction) == (40, 0.45)  # edited while the label stayed
    assert brain.keep_recent_messages == 10 and brain.auto_continue is True


def test_policies_that_follow_a_preset_drop_the_old_tool_output_protection(team):
    step_0011 = importlib.import_module("sessions_app.migrations.0011_protect_tool_tokens_zero")
    following = policy_with(team, preset="default", protect_tool_tokens=40_000)
    own_number = policy_with(team, preset="adk", protect_tool_tokens=12_000)
    custom = policy_with(team, preset="custom", protect_tool_tokens=40_000)
    step_0011.follow_the_presets(django_apps, None)
    for policy in (following, own_number, custom):
        policy.refresh_from_db()
    assert following.protect_tool_tokens == 0
    assert projects.preset_label(following) == "default"
    assert own_number.protect_tool_tokens == 12_000 and custom.protect_tool_tokens == 40_000


def test_a_policy_that_named_an_openai_summarizer_model_gets_the_openai_provider(team):
    step_0027 = importlib.import_module("sessions_app.migrations.0027_summarizer_provider")
    claude = policy_with(team, summarizer_model="claude-haiku-4-5")
    gpt = policy_with(team, summarizer_model="gpt-4o-mini")
    reasoning = policy_with(team, summarizer_model="o4-mini")
    other = policy_with(team, summarizer_model="openrouter-thing")
    step_0027.provider_of_the_model(django_apps, None)
    providers = [CompactionPolicy.objects.get(pk=p.pk).summarizer_provider for p in (claude, gpt, reasoning, other)]
    assert providers == ["anthropic", "openai", "openai", "anthropic"]
    assert (
        validate({f: getattr(CompactionPolicy.objects.get(pk=gpt.pk), f) for f in CompactionPolicy.ENGINE_FIELDS}) == {}
    )
