"""The provider requests ``bench/scale.py`` loads with each stage: about one per two messages, over
the last REQUEST_DAYS days, made by PEOPLE people with two API keys each, with REQUEST_MODELS, priced;
and their sums in the spend rollup (``DailySpend``), as the recording services keep it.

Every row's ``saved_tokens`` is 0, as the savings definition says of these: the bench's compactions
(``scale.add_compactions``) finish after every request of their sessions was made."""

from __future__ import annotations

import io
import random
import uuid
from collections import defaultdict
from datetime import timedelta
from decimal import Decimal

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
    # (project, UTC day, user, key, model) -> requests, the four token kinds, cost in 1e-10 USD
    buckets: dict[tuple[int, str, int, int, str], list[int]] = defaultdict(lambda: [0] * 6)
    for session_id, project_id, count in plan:
        user_id, key_id = callers[session_id % len(callers)]  # a session's requests come from one caller
        model = models[session_id % len(models)]
        prices = REQUEST_MODELS[model]
        for _ in range(count):
            used = (rng.randint(1, 400), rng.randint(0, 3_000), rng.randint(0, 60_000), rng.randint(20, 2_000))
            cost = sum(n * price for n, price in zip(used, prices, strict=True)) / 1_000_000
            moment = now - timedelta(seconds=rng.uniform(0, span))
            at = moment.isoformat()
            ttfb = rng.uniform(300, 2_000)
            rows.write(
                "\t".join([str(uuid.UUID(int=rng.getrandbits(128))), str(session_id), str(project_id), str(key_id),
                           str(user_id), at, model, *map(str, used), "", f"{cost:.10f}", f"{ttfb:.1f}",
                           f"{ttfb + rng.uniform(500, 30_000):.1f}", "200", "proxy", "0", "f"]) + "\n"
            )  # fmt: skip
            sums = buckets[(project_id, moment.date().isoformat(), user_id, key_id, model)]
            for n, value in enumerate((1, *used, int(Decimal(f"{cost:.10f}").scaleb(10)))):
                sums[n] += value
            loaded += 1
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(
            "COPY sessions_app_providerrequest (key, session_id, project_id, api_key_id, user_id, created_at, "
            "model, input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens, "
            "service_tier, cost_usd, ttfb_ms, duration_ms, status, source, saved_tokens, estimated) FROM STDIN"
        ) as copy,
    ):
        copy.write(rows.getvalue())
    _copy_rollup(buckets)
    return loaded


_BUCKET = "project_id, day, user_id, api_key_id, model"
_SUMS = "requests, input_tokens, cache_creation_input_tokens, cache_read_input_tokens, output_tokens, cost_units"


def _copy_rollup(buckets: dict[tuple[int, str, int, int, str], list[int]]) -> None:
    """The batch's sums COPYed beside the rollup, then added to it (a bucket earlier batches began)."""
    from django.db import connection

    table = io.StringIO()
    for key, sums in buckets.items():
        table.write("\t".join(map(str, (*key, *sums))) + "\n")
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TEMP TABLE IF NOT EXISTS bench_spend (project_id bigint, day date, user_id bigint, "
            "api_key_id bigint, model text, requests bigint, input_tokens bigint, cache_creation_input_tokens "
            "bigint, cache_read_input_tokens bigint, output_tokens bigint, cost_units bigint)"
        )
        cursor.execute("TRUNCATE bench_spend")
        with cursor.cursor.copy(f"COPY bench_spend ({_BUCKET}, {_SUMS}) FROM STDIN") as copy:
            copy.write(table.getvalue())
        added = ", ".join(f"{n} = sessions_app_dailyspend.{n} + excluded.{n}" for n in _SUMS.split(", "))
        cursor.execute(
            f"INSERT INTO sessions_app_dailyspend ({_BUCKET}, {_SUMS}, unpriced_requests, saved_tokens) "
            f"SELECT {_BUCKET}, {_SUMS}, 0, 0 FROM bench_spend "
            f"ON CONFLICT ({_BUCKET}) DO UPDATE SET {added}"
        )
