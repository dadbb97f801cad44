"""The provider requests ``bench/scale.py`` loads with each stage: about one per two messages, over
the last REQUEST_DAYS days, made by PEOPLE people with two API keys each, with REQUEST_MODELS, priced."""

from __future__ import annotations

import io
import random
import uuid
from datetime import timedelta

# Provider requests: who made them (people, each with two keys), with which model at what price (USD per
# million tokens: input, cache write, cache read, output), over how many days.
PEOPLE = 6
REQUEST_MODELS = {
    "claude-sonnet-4-5": (3.0, 3.75, 0.30, 15.0),
    "claude-opus-4-5": (5.0, 6.25, 0.50, 25.0),
    "claude-haiku-4-5": (1.0, 1.25, 0.10, 5.0),
    "gpt-4o": (2.5, 0.0, 1.25, 10.0),
}
REQUEST_DAYS = 30


def copy_requests(plan: list[tuple[int, int, int]], callers: list[tuple[int, int]], rng: random.Random) -> int:
    """COPY ``(session id, project id, count)`` worth of provider requests: made over the last
    REQUEST_DAYS days by one of ``callers`` (user id, API key id) with one of REQUEST_MODELS, tokens
    by kind as an agent's cached requests look, priced. How many were loaded."""
    from django.db import connection
    from django.utils import timezone

    now, span = timezone.now(), REQUEST_DAYS * 86_400
    models = list(REQUEST_MODELS)
    rows = io.StringIO()
    loaded = 0
    for session_id, project_id, count in plan:
        user_id, key_id = callers[session_id % len(callers)]  # a session's requests come from one caller
        model = models[session_id % len(models)]
        prices = REQUEST_MODELS[model]
        for _ in range(count):
            used = (rng.randint(1, 400), rng.randint(0, 3_000), rng.randint(0, 60_000), rng.randint(20, 2_000))
            cost = sum(n * price for n, price in zip(used, prices, strict=True)) / 1_000_000
            at = (now - timedelta(seconds=rng.uniform(0, span))).isoformat()
            ttfb = rng.uniform(300, 2_000)
            rows.write(
                "\t".join([str(uuid.UUID(int=rng.getrandbits(128))), str(session_id), str(project_id), str(key_id),
                           str(user_id), at, model, *map(str, used), "", f"{cost:.10f}", f"{ttfb:.1f}",
                           f"{ttfb + rng.uniform(500, 30_000):.1f}", "200", "proxy"]) + "\n"
            )  # fmt: skip
            loaded += 1
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(
            "COPY sessions_app_providerrequest (key, session_id, project_id, api_key_id, user_id, created_at, "
            "model, input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens, "
            "service_tier, cost_usd, ttfb_ms, duration_ms, status, source) FROM STDIN"
        ) as copy,
    ):
        copy.write(rows.getvalue())
    return loaded
