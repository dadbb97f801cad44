"""What compaction saved (``selectors.savings``): each request after a compaction would have carried
its saving as input, priced here with the genai-prices package itself; a reverted compaction saves
nothing, a model without a price adds tokens but no dollars, a project's figure is its sessions' sum,
and only the project's members read it."""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from decimal import Decimal

import genai_prices
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from sessions_app.models import AgentSession, Compaction, ProviderRequest
from sessions_app.selectors.spend import project_spend, session_spend
from sessions_app.services import spend_rollup
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = pytest.mark.django_db

SONNET, HAIKU = "claude-sonnet-4-5", "claude-haiku-4-5"


def compact(api, session: AgentSession, level: str) -> Compaction:
    response = api.post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": level})
    assert response.status_code == 202 and response.json()["status"] == "succeeded", response.content
    return Compaction.objects.get(pk=response.json()["id"])


def request(session: AgentSession, at: datetime, model: str, compacted: Compaction | None = None) -> ProviderRequest:
    return spend_rollup.request_store(
        key=uuid.uuid4(),
        session=session,
        project=session.project,
        user=session.owner,
        created_at=at,
        model=model,
        input_tokens=100,
        output_tokens=10,
        status=200,
        compacted=compacted,
    )


def priced(model: str, tokens: int) -> Decimal:
    """The package's own price of ``tokens`` uncached input tokens on ``model``."""
    return genai_prices.calc_price(genai_prices.Usage(input_tokens=tokens), model, provider_id="anthropic").total_price


def saved(c: Compaction) -> int:
    assert c.tokens_before is not None and c.tokens_after is not None
    return c.tokens_before - c.tokens_after


def same_money(a: Decimal, b: Decimal) -> bool:
    return a.quantize(Decimal("1e-9")) == b.quantize(Decimal("1e-9"))


@pytest.fixture
def worked(session_of, api_as, team):
    """Two sessions with requests before, between and after their compactions; the newest one of
    the first session reverted."""
    api = api_as(team.alice)
    first = session_of(model=SONNET, context_window=30_000, auto_compact=False)
    append(first, agent_rounds(24))
    pruned = compact(api, first, "compact")
    at = pruned.finished_at
    assert at is not None
    request(first, at - timedelta(minutes=5), SONNET)  # before: saves nothing
    request(first, at - timedelta(seconds=1), SONNET, compacted=pruned)  # the proxy compacted for it
    request(first, at + timedelta(minutes=1), SONNET)
    request(first, at + timedelta(minutes=2), "mystery-model")  # tokens saved, no price
    summarized = compact(api, first, "summarize")
    request(first, summarized.finished_at + timedelta(minutes=1), SONNET)  # only the prune, once reverted
    assert api.post(f"/api/v1/compactions/{summarized.pk}/revert/").status_code == 200
    second = session_of(model=HAIKU, context_window=30_000, auto_compact=False)
    append(second, agent_rounds(20, seed=2))
    other = compact(api, second, "summarize")
    request(second, other.finished_at + timedelta(minutes=1), HAIKU)
    request(second, other.finished_at + timedelta(minutes=3), HAIKU)
    return first, second, pruned, other


def test_each_request_after_a_compaction_saves_its_tokens_at_the_input_price(worked):
    first, second, pruned, other = worked
    spend = session_spend(first)
    # Each row carries its own figure: the prune for the four after it (or made from it), 0 before.
    assert sorted(first.requests.values_list("saved_tokens", flat=True)) == [0, *[saved(pruned)] * 4]
    # Three priced requests and one unpriced carry the prune; the reverted summary counts nowhere.
    assert spend.saved_tokens == 4 * saved(pruned)
    assert same_money(spend.saved_usd, 3 * priced(SONNET, saved(pruned)))
    theirs = session_spend(second)
    assert theirs.saved_tokens == 2 * saved(other)
    assert same_money(theirs.saved_usd, 2 * priced(HAIKU, saved(other)))
    assert spend.saved_usd > 0 and theirs.saved_usd > 0


def test_a_project_saves_what_its_sessions_save_reading_the_rollup_only(worked, team):
    first, second, _, _ = worked
    sessions = [session_spend(first), session_spend(second)]
    for by in ("day", "owner", "key", "model"):
        with CaptureQueriesContext(connection) as queries:
            found = project_spend(project=team.project, days=30, by=by)
        read = " ".join(q["sql"] for q in queries)
        assert "sessions_app_dailyspend" in read and "sessions_app_providerrequest" not in read, by
        assert "sessions_app_compaction" not in read, by
        assert found.total.saved_tokens == sum(s.saved_tokens for s in sessions), by
        assert same_money(found.total.saved_usd, sum((s.saved_usd for s in sessions), Decimal(0))), by
    per_model = {row.label: row for row in project_spend(project=team.project, days=30, by="model").rows}
    assert same_money(per_model[HAIKU].saved_usd, sessions[1].saved_usd)
    assert per_model["mystery-model"].saved_usd == 0 and per_model["mystery-model"].saved_tokens > 0


def test_the_api_and_the_dashboard_show_it_to_members_only(worked, team, api_as, client):
    first, _, _, _ = worked
    mine = api_as(team.carol).get(f"/api/v1/sessions/{first.pk}/spend/")
    assert mine.status_code == 200
    spend = session_spend(first)
    assert mine.json()["saved_tokens"] == spend.saved_tokens
    assert Decimal(mine.json()["saved_usd"]) == spend.saved_usd.quantize(Decimal("1e-10"))
    assert mine.json()["requests"] == 5
    for path in (f"/api/v1/sessions/{first.pk}/spend/", f"/api/v1/projects/{team.project.pk}/spend/"):
        outsider = api_as(team.mallory).get(path)
        assert outsider.status_code == 404 and outsider.json()["code"], path
    body = api_as(team.carol).get(f"/api/v1/projects/{team.project.pk}/spend/?by=model").json()
    total = project_spend(project=team.project, days=30, by="model").total
    assert body["total"]["saved_usd"] == f"{total.saved_usd:.10f}"
    client.force_login(team.carol.user)
    page = client.get(f"/projects/{team.project.pk}/").content.decode()
    shown = re.search(r'<p class="saved" data-saved="([^"]+)" data-saved-tokens="([^"]+)">Compaction saved', page)
    assert shown, "the dashboard says what compaction saved"
    dashboard = project_spend(project=team.project, days=14, by="owner").total
    assert shown.groups() == (f"{dashboard.saved_usd:.10f}", f"{dashboard.saved_tokens:,}")
