"""Budgets through the real proxy against the fake upstreams (issue 31's acceptance): a key with a $1
daily budget and refusal on is told once at 80 % and once at 100 % (webhook deliveries with the
figures the requests' rows add up to), then its next request answers 429 in the provider's own error
shape, with ``retry-after``, and never reaches the upstream; another key goes on; a project-wide
budget refuses every key, on the OpenAI routes in OpenAI's shape; a count of tokens is never refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import anthropic
import openai
import pytest

from sessions_app.models import ApiKey, ProviderRequest, WebhookDelivery
from sessions_app.services import budgets
from tests.conftest import Team
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.sessions_app.webhook_receiver import receiver

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.usefixtures("fresh_budget_flags")]

CLAUDE = "claude-sonnet-4-5"
CALLER_KEY = "sk-callers-own-key-0123456789"
PROMPT_TOKENS = 100_000  # at $3 per million: $0.30 a request, and a cent's fraction of output


@pytest.fixture
def fake(settings: Any) -> Any:
    with FakeAnthropic() as server:
        settings.CTX_PROXY_UPSTREAM_URL = server.base_url
        yield server


@pytest.fixture
def fake_openai(settings: Any) -> Any:
    with FakeOpenAI() as server:
        settings.CTX_PROXY_OPENAI_URL = server.base_url
        yield server


@pytest.fixture
def hook(team, api_as):
    with receiver() as rx:
        body = {"url": rx.url, "events": ["budget.warning", "budget.exceeded"]}
        assert api_as(team.alice).post(f"/api/v1/projects/{team.project.pk}/webhooks/", body).status_code == 201
        yield rx


def claude(proxy_sdk: Any, persona: Any, session: str) -> anthropic.Anthropic:
    return proxy_sdk({"ctxweb-api-key": persona.key, "ctxweb-session": session}, api_key=CALLER_KEY)


def ask(client: anthropic.Anthropic, fake: FakeAnthropic, n: int) -> Any:
    fake.queue_reply(f"Step {n} done.", input_tokens=PROMPT_TOKENS, output_tokens=10)
    return client.messages.create(model=CLAUDE, max_tokens=64, messages=[{"role": "user", "content": f"Do step {n}."}])


def spent_by(key: ApiKey | None = None, *, upto: int | None = None) -> Decimal:
    rows = ProviderRequest.objects.order_by("created_at", "pk")
    if key is not None:
        rows = rows.filter(api_key=key)
    costs = [row.cost_usd or Decimal(0) for row in rows][:upto]
    assert all(cost > 0 for cost in costs)  # every request priced
    return sum(costs, Decimal(0))


def refused(call: Any) -> anthropic.RateLimitError:
    with pytest.raises(anthropic.RateLimitError) as caught:
        call()
    return caught.value


def test_a_keys_daily_budget_warns_refuses_and_spares_the_upstream(proxy_sdk, team: Team, fake, hook):
    bob, alice = ApiKey.objects.get(user=team.bob.user), ApiKey.objects.get(user=team.alice.user)
    budget, _ = budgets.budget_create(project=team.project, key=bob.pk, period="day", limit_usd="1", refuse=True)
    alices, _ = budgets.budget_create(project=team.project, key=alice.pk, period="day", limit_usd="1", refuse=True)
    client = claude(proxy_sdk, team.bob, "bob-run")
    events = []
    for n in range(4):  # $0.30 each: 30 %, 60 %, 90 % (warning), 120 % (exceeded)
        ask(client, fake, n)
        events.append(sorted(d.event for d in WebhookDelivery.objects.all()))
    assert events == [[], [], ["budget.warning"], ["budget.exceeded", "budget.warning"]]
    delivered = {r.json["event"]: r.json["data"] for r in hook.wait_for(2)}
    assert set(delivered) == {"budget.warning", "budget.exceeded"}
    today = datetime.now(UTC).date()
    for event, upto in (("budget.warning", 3), ("budget.exceeded", 4)):
        data, spent = delivered[event], spent_by(bob, upto=upto)
        assert Decimal(data["spent_usd"]) == spent and Decimal("0.9") <= spent <= Decimal("1.21"), event
        assert data["percent"] == float((spent * 100).quantize(Decimal("0.1"))), event
        assert (data["budget"], data["scope"], data["key"]["prefix"]) == (budget.pk, "key", bob.prefix)
        assert data["period"] == "day"
        assert (data["limit_usd"], data["period_start"]) == ("1.00", today.isoformat())
        assert team.bob.key not in str(data)

    upstream_before = len(fake.requests_for("messages"))
    rows_before = ProviderRequest.objects.count()
    asked_at = datetime.now(UTC)  # the Retry-After is whole seconds from when the refusal was decided
    error = refused(lambda: ask(client, fake, 4))
    reset = datetime.combine(today + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    assert error.status_code == 429
    assert error.body == {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": f"ctxweb budget exceeded: daily budget of $1.00 for key {bob.prefix}… (test): "
            f"${spent_by(bob):,.2f} spent since {today.isoformat()} 00:00 UTC; resets at "
            f"{reset:%Y-%m-%d %H:%M} UTC.",
        },
    }
    retry_after = int(error.response.headers["retry-after"])
    assert 0 < retry_after <= (reset - asked_at).total_seconds() + 1
    assert len(fake.requests_for("messages")) == upstream_before  # nothing went upstream
    assert ProviderRequest.objects.count() == rows_before
    assert WebhookDelivery.objects.count() == 2  # nothing announced twice

    ask(claude(proxy_sdk, team.alice, "alice-run"), fake, 5)  # another key, its own budget: goes through
    assert len(fake.requests_for("messages")) == upstream_before + 1
    alices.refresh_from_db()
    assert alices.warned_period is None and WebhookDelivery.objects.count() == 2

    budgets.budget_update(budget=budget, refuse=False)  # told, no longer refused
    ask(client, fake, 6)
    assert len(fake.requests_for("messages")) == upstream_before + 2


def test_a_project_budget_refuses_every_key_and_openai_hears_it_in_its_shape(
    proxy_sdk, proxy_openai_sdk, team: Team, fake, fake_openai
):
    budgets.budget_create(project=team.project, period="month", limit_usd="0.50", refuse=True)
    ask(claude(proxy_sdk, team.alice, "alice-run"), fake, 0)  # $0.30
    ask(claude(proxy_sdk, team.bob, "bob-run"), fake, 1)  # $0.60: past the project's limit
    seen = len(fake.requests_for("messages"))
    said: Any = refused(lambda: ask(claude(proxy_sdk, team.alice, "alice-run"), fake, 2)).body
    assert "monthly budget of $0.50 for project Alpha: $0.60 spent since " in said["error"]["message"]
    assert len(fake.requests_for("messages")) == seen

    gpt = proxy_openai_sdk({"ctxweb-api-key": team.bob.key}, api_key=CALLER_KEY)
    with pytest.raises(openai.RateLimitError) as caught:
        gpt.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    body: Any = caught.value.body  # OpenAI's SDK keeps the "error" object
    assert caught.value.status_code == 429 and int(caught.value.response.headers["retry-after"]) > 0
    assert isinstance(body, dict)
    assert (body["type"], body["code"], body["param"]) == ("rate_limit_error", "budget_exceeded", None)
    assert body["message"].startswith("ctxweb budget exceeded: monthly budget of $0.50 for project Alpha: $0.60")
    assert fake_openai.requests == []

    counted = claude(proxy_sdk, team.bob, "bob-run").messages.count_tokens(
        model=CLAUDE, messages=[{"role": "user", "content": "How long is this?"}]
    )
    assert counted.input_tokens > 0  # a count costs nothing: never refused
