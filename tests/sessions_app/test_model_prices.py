"""Model windows and prices (issue 29), as sessions see them: an admin's ModelProfile row over the
genai-prices package over the fallback, field by field; an input cap puts a GPT-5 session at handoff
past 272k; the 1M window when asked; a learnt window that shrinks and grows back; prices per kind of
token in ``price_of``, ``GET /models/``, the dashboard and for every model the demo uses."""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from compaction.model_catalog import FALLBACK_CONTEXT_WINDOW, spec_for
from compaction.model_prices import TokenUsage
from sessions_app.models import AgentSession, ModelProfile
from sessions_app.selectors import prices, usage
from sessions_app.services import agent_sessions, demo
from sessions_app.services.provider_requests import Answered, provider_request_record
from sessions_app.services.provider_usage import Used
from sessions_app.services.proxy import messages as proxy_messages

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_profiles() -> Any:
    usage.forget_model_profiles()
    yield
    usage.forget_model_profiles()


def session(team: Any, model: str, used: int = 0, **fields: Any) -> AgentSession:
    made = agent_sessions.session_create(user=team.alice.user, project=team.project, name=model, model=model)
    AgentSession.objects.filter(pk=made.pk).update(message_tokens=used, **fields)
    made.refresh_from_db()
    return made


def test_a_gpt5_session_past_its_272k_input_cap_is_at_handoff(team):
    status = usage.session_status(session(team, "gpt-5", used=275_000))
    assert status["context_window"] == 272_000  # the input it takes, not its 400k window
    assert status["level"] == "handoff" and status["free"] < 0
    assert usage.session_status(session(team, "gpt-5-mini", used=150_000))["level"] == "ok"


def test_a_1m_model_has_its_1m_window(team):
    assert usage.session_status(session(team, "claude-opus-4-7[1m]", used=300_000))["context_window"] == 1_000_000
    assert usage.model_info("claude-sonnet-4-5[1m]").context_window == 1_000_000
    # An admin's window for the model is its standard one; asked with [1m], the 1M one still holds.
    ModelProfile.objects.filter(name="claude-sonnet-4-5").update(context_window=150_000)
    usage.forget_model_profiles()
    assert usage.model_info("claude-sonnet-4-5").context_window == 150_000
    assert usage.model_info("claude-sonnet-4-5[1m]").context_window == 1_000_000


def test_a_profile_row_overrides_only_the_fields_it_sets(team):
    row = ModelProfile.objects.get(name="gpt-5")  # seeded; 0026 handed its figures to the package
    assert (row.context_window, row.max_output_tokens, row.input_price_per_mtok) == (None, None, None)
    info = usage.model_info("gpt-5-2025-08-07")
    assert (info.name, info.context_window, info.max_output_tokens) == ("gpt-5", 272_000, 128_000)
    assert info.prices == spec_for("gpt-5").prices
    row.output_price_per_mtok, row.max_output_tokens = Decimal(12), 64_000
    row.save()
    usage.forget_model_profiles()
    info = usage.model_info("gpt-5")
    assert info.prices is not None and (info.prices.input, info.prices.output) == (Decimal("1.25"), Decimal(12))
    assert (info.context_window, info.max_output_tokens) == (272_000, 64_000)
    assert usage.model_info("my-local-llama").context_window == FALLBACK_CONTEXT_WINDOW
    assert usage.model_info("my-local-llama").prices is None


def test_price_of_prices_each_kind_of_token():
    used = TokenUsage(input=1_000, cache_write=2_000, cache_read=10_000, output=500)
    expected = (1_000 * Decimal(3) + 2_000 * Decimal("3.75") + 10_000 * Decimal("0.3") + 500 * 15) / 10**6
    assert prices.price_of("claude-sonnet-4-5-20250929", used) == expected
    ModelProfile.objects.create(name="acme-coder", provider="acme", input_price_per_mtok=1, output_price_per_mtok=2)
    usage.forget_model_profiles()
    assert prices.price_of("acme-coder", TokenUsage(input=10**6, output=10**6)) == Decimal(3)
    assert prices.price_of("my-local-llama", used) is None


def test_every_model_the_demo_uses_is_priced_from_the_package(settings):
    loaded = demo.demo_load()
    models = {s.model for s in loaded.sessions}
    assert models
    for model in models:
        info, spec = usage.model_info(model), spec_for(model)
        assert spec is not None and spec.prices is not None, model
        assert info.prices == spec.prices, model  # no row's price in between
        assert None not in (info.prices.input, info.prices.cache_read, info.prices.output), model


def test_the_models_endpoint_shows_windows_and_prices(api_as, team):
    answer = api_as(team.bob).get("/api/v1/models/")
    assert answer.status_code == 200
    rows = {row["name"]: row for row in answer.json()["results"]}
    assert rows["claude-opus-4-7"]["context_window"] == 1_000_000
    assert rows["gpt-5"]["context_window"] == 272_000
    sonnet = rows["claude-sonnet-4-5"]
    assert sonnet["long_context_window"] == 1_000_000 and rows["claude-haiku-4-5"]["long_context_window"] is None
    assert sonnet["prices"]["cache_write"] == "3.75" and sonnet["prices"]["tiers"][0]["above"] == 200_000
    assert answer.json()["fallback_context_window"] == FALLBACK_CONTEXT_WINDOW
    assert answer.json()["data_package"] == "genai-prices 0.2.3"


def test_the_dashboard_prices_a_model_only_the_package_knows(api_as, team):
    made = session(team, "claude-opus-4-7")
    answered = Answered(
        key=uuid.uuid4(), arrived_at=timezone.now(), status=200, model="claude-opus-4-7",
        used=Used(tokens=TokenUsage(input=400_000, output=1_000)),
    )  # fmt: skip
    provider_request_record(session=made, answered=answered)
    cost = api_as(team.bob).get(f"/api/v1/projects/{team.project.pk}/dashboard/").json()["cost"]
    assert (cost["requests"], cost["unpriced_requests"]) == (1, 0) and Decimal(cost["dollars"]) > 0


# ----------------------------------------------------------------------------- a learnt window


def answered(made: AgentSession, read: int) -> AgentSession:
    """The provider answered a request of ``read`` input tokens (ctxweb estimated as many)."""
    proxy_messages.exact_from_usage(
        made, {"input_tokens": read, "output_tokens": 10}, reply_seq=made.last_seq, raw_request=read
    )
    made.refresh_from_db()
    return made


def test_a_learnt_window_shrinks_then_grows_back_when_a_larger_request_is_answered(team):
    made = session(team, "claude-sonnet-4-5", used=100_000)
    assert usage.session_status(made)["context_window"] == 200_000
    made = agent_sessions.session_window_learn(session=made, window=120_000)  # a refusal named 120k
    assert usage.session_status(made)["context_window"] == 120_000
    made = answered(made, 110_000)  # within it: nothing learnt
    assert made.context_window_learnt == 120_000 and made.exact_tokens == 110_010
    made = answered(made, 150_000)  # more than it: the model's own window again
    assert made.context_window_learnt is None and usage.session_status(made)["context_window"] == 200_000


def test_a_learnt_window_grows_past_the_models_when_the_provider_took_more(team):
    made = session(team, "claude-sonnet-4-5")
    made = agent_sessions.session_window_learn(session=made, window=150_000)
    made = answered(made, 400_000)  # the 1M beta, say, that the session's model name does not show
    assert made.context_window_learnt == 400_010 and made.exact_tokens == 400_010


def test_an_unbelievable_figure_or_the_sessions_own_window_is_not_grown(team):
    made = session(team, "claude-sonnet-4-5")
    made = agent_sessions.session_window_learn(session=made, window=150_000)
    proxy_messages.exact_from_usage(made, {"input_tokens": 180_000, "output_tokens": 1}, reply_seq=0, raw_request=9)
    made.refresh_from_db()
    assert made.context_window_learnt == 150_000  # not a count of that request
    own = session(team, "claude-sonnet-4-5", context_window_override=150_000, context_window_learnt=100_000)
    assert usage.session_status(own)["context_window"] == 150_000  # the session's own window wins
    assert answered(own, 160_000).context_window_learnt == 100_000


def test_another_model_forgets_the_learnt_window(team):
    made = agent_sessions.session_window_learn(session=session(team, "claude-sonnet-4-5"), window=90_000)
    made = agent_sessions.session_update(session=made, model="claude-opus-4-7")
    assert made.context_window_learnt is None and usage.session_status(made)["context_window"] == 1_000_000


def test_0026_hands_seeded_figures_to_the_package_and_keeps_an_admins():
    import importlib

    from django.apps import apps

    migration = importlib.import_module("sessions_app.migrations.0026_model_prices")
    ModelProfile.objects.filter(name="gpt-4o").update(
        context_window=128_000, max_output_tokens=16_384, input_price_per_mtok=Decimal("2.5")
    )  # as seeded
    ModelProfile.objects.filter(name="o3").update(
        context_window=150_000, max_output_tokens=100_000, input_price_per_mtok=Decimal(3)
    )  # an admin's window and price
    migration.hand_to_package(apps, None)
    seeded = ModelProfile.objects.get(name="gpt-4o")
    assert (seeded.context_window, seeded.max_output_tokens, seeded.input_price_per_mtok) == (None, None, None)
    edited = ModelProfile.objects.get(name="o3")
    assert (edited.context_window, edited.max_output_tokens, edited.input_price_per_mtok) == (150_000, None, Decimal(3))
    usage.forget_model_profiles()
    assert usage.model_info("o3").context_window == 150_000 and usage.model_info("o3").input_price == Decimal(3)
