"""Model profiles admins add as patterns (``claude-sonnet-*``): the lookup behind STATUS, counts and
calibration uses them, admin validates them, and an edit in admin is seen without waiting."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError

from compaction.model_catalog import FALLBACK_CONTEXT_WINDOW
from sessions_app.models import ModelProfile
from sessions_app.selectors import usage
from sessions_app.services import counting

pytestmark = pytest.mark.django_db


def test_a_pattern_row_gives_its_numbers_to_the_models_it_matches():
    assert usage.model_info("acme-coder-7b").context_window == FALLBACK_CONTEXT_WINDOW
    ModelProfile.objects.create(name="acme-coder*", provider="acme", context_window=32_768, calibration_factor=1.1)
    ModelProfile.objects.create(name="acme-coder-7b-long", provider="acme", context_window=131_072)
    usage.forget_model_profiles()
    info = usage.model_info("acme-coder-7b")
    assert (info.name, info.context_window, info.calibration, info.known) == ("acme-coder*", 32_768, 1.1, True)
    assert usage.model_info("acme-coder-7b-long").context_window == 131_072  # an exact name wins
    # A pattern wins over the built-in catalogue, as every profile row does.
    ModelProfile.objects.create(name="claude-sonnet-4-5-2025*", context_window=1_000_000)
    usage.forget_model_profiles()
    assert usage.model_info("claude-sonnet-4-5-20250929").context_window == 1_000_000
    assert usage.model_info("claude-sonnet-4-5").context_window == 200_000


def test_calibration_learned_from_a_member_goes_to_the_pattern_row():
    ModelProfile.objects.create(name="acme-coder*", provider="acme", context_window=32_768)
    usage.forget_model_profiles()
    factor = counting.model_calibration_update(model="acme-coder-7b", exact=1_200, raw_estimate=1_000)
    assert factor is not None and factor > 1.0
    assert ModelProfile.objects.get(name="acme-coder*").calibration_samples == 1
    assert usage.model_info("acme-coder-13b").calibration == pytest.approx(factor)


def test_a_pattern_that_could_never_match_is_refused_on_its_field():
    for name in ("*", "Acme-*", "acme-*-7b"):
        with pytest.raises(ValidationError) as err:
            ModelProfile(name=name, context_window=32_768).full_clean()
        assert set(err.value.message_dict) == {"name"}


def test_admin_adds_a_pattern_and_lookups_see_it_at_once(client):
    client.force_login(get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123"))
    assert usage.model_info("acme-coder-7b").context_window == FALLBACK_CONTEXT_WINDOW  # cached now
    fields = {"provider": "acme", "context_window": 32_768, "max_output_tokens": 4_096, "calibration_samples": 0}
    bad = client.post("/admin/sessions_app/modelprofile/add/", {**fields, "name": "Acme-*", "calibration_factor": 1})
    assert bad.status_code == 200 and "'acme-*'" in bad.context["adminform"].form.errors["name"][0]
    ok = client.post("/admin/sessions_app/modelprofile/add/", {**fields, "name": "acme-*", "calibration_factor": 1})
    assert ok.status_code == 302
    assert usage.model_info("acme-coder-7b").context_window == 32_768
