"""Provider requests spread over people, keys, models and days (one without a price, one too old,
one in another project), and the spend they add up to, summed here without the selector."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sessions_app.models import AgentSession, ApiKey, ProviderRequest
from sessions_app.services import agent_sessions, keys, spend_rollup

NOW = datetime(2026, 3, 20, 15, 30, tzinfo=UTC)
SONNET = "claude-sonnet-4-5"
TOKENS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


@dataclass
class Spread:
    rows: list[ProviderRequest]  # the project's, inside the window
    alice_key: ApiKey
    alice_ci_key: ApiKey
    bob_key: ApiKey
    alice_session: AgentSession
    bob_session: AgentSession


def spread(team: Any, *, days: int = 30) -> Spread:
    alice_key = ApiKey.objects.get(user=team.alice.user)
    alice_ci_key, _ = keys.apikey_create(user=team.alice.user, name="=ci runner")  # a name like a formula
    bob_key = ApiKey.objects.get(user=team.bob.user)
    mine = agent_sessions.session_create(user=team.alice.user, project=team.project, name="a", model=SONNET)
    bobs = agent_sessions.session_create(user=team.bob.user, project=team.project, name="b", model="gpt-4.1")
    plan = [
        # session, key, model, days ago, hours ago, tokens (in, write, read, out), cost
        (mine, alice_key, "claude-sonnet-4-5", 0, 1, (1200, 300, 5000, 400), Decimal("0.0123456789")),
        (mine, alice_key, "claude-sonnet-4-5", 0, 2, (10, 0, 9000, 50), Decimal("0.0045")),
        (mine, alice_ci_key, "claude-haiku-4-5", 1, 0, (700, 0, 0, 90), Decimal("0.00115")),
        (mine, alice_ci_key, "claude-haiku-4-5", 6, 3, (1, 2, 3, 4), Decimal("0.0000091")),
        (bobs, bob_key, "gpt-4.1", 2, 5, (2000, 0, 1000, 300), Decimal("0.0067")),
        (bobs, bob_key, "mystery-model", 2, 6, (500, 0, 0, 20), None),  # no price: never $0
        (bobs, None, "gpt-4.1", days - 1, 0, (100, 0, 0, 10), Decimal("0.0003")),  # the first day, no key
    ]
    rows = [_request(team.project, s, k, m, d, h, t, c) for s, k, m, d, h, t, c in plan]
    _request(team.project, bobs, bob_key, "gpt-4.1", days, 1, (999, 0, 0, 9), Decimal(9))  # the day before
    other = agent_sessions.session_create(user=team.mallory.user, project=_mallorys(team), name="m", model="gpt-4.1")
    _request(other.project, other, None, "gpt-4.1", 0, 1, (77, 0, 0, 7), Decimal(7))  # another project's
    return Spread(rows, alice_key, alice_ci_key, bob_key, mine, bobs)


def _mallorys(team: Any) -> Any:
    from sessions_app.models import Project

    return Project.objects.get(name="Mallory's own")


def _request(project, session, key, model, days_ago, hours_ago, tokens, cost) -> ProviderRequest:
    at = NOW.replace(hour=15, minute=0) - timedelta(days=days_ago, hours=hours_ago)  # never across midnight
    return spend_rollup.request_store(
        key=uuid.uuid4(),
        session=session,
        project=project,
        api_key=key,
        user=key.user if key else session.owner,
        created_at=at,
        model=model,
        **dict(zip(TOKENS, tokens, strict=True)),
        cost_usd=cost,
        status=200,
    )


def expected(rows: list[ProviderRequest], group: Any) -> dict[Any, dict[str, Any]]:
    """Sums per ``group(row)``: requests, tokens by kind, cost over the priced (None when none is)
    and the unpriced count."""
    out: dict[Any, dict[str, Any]] = defaultdict(
        lambda: {"requests": 0, **dict.fromkeys(TOKENS, 0), "cost_usd": None, "unpriced_requests": 0}
    )
    for row in rows:
        sums = out[group(row)]
        sums["requests"] += 1
        for name in TOKENS:
            sums[name] += getattr(row, name)
        if row.cost_usd is None:
            sums["unpriced_requests"] += 1
        else:
            sums["cost_usd"] = (sums["cost_usd"] or Decimal(0)) + row.cost_usd
    return dict(out)
