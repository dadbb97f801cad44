"""Each provider request's ``saved_tokens`` and the spend rollup (``DailySpend``), filled from the rows
stored: once, O(rows), streamed in chunks (services/spend_rollup.py keeps both from then on). And a
partial index of the sessions without a stored level, which the dashboard looks for on every view."""

from collections import defaultdict
from datetime import UTC
from decimal import Decimal

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import F, Q

CHUNK = 5_000
COST_UNITS = 10**10
SUMS = (
    "requests",
    "unpriced_requests",
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
    "cost_units",
    "saved_tokens",
)


def fill(apps, schema_editor):
    ProviderRequest = apps.get_model("sessions_app", "ProviderRequest")
    Compaction = apps.get_model("sessions_app", "Compaction")
    DailySpend = apps.get_model("sessions_app", "DailySpend")
    # What each succeeded compaction saved the requests it was in force for (selectors/savings.py).
    done = Compaction.objects.filter(status="succeeded", tokens_before__isnull=False, tokens_after__isnull=False)
    for pk, session_id, finished_at, before, after in done.values_list(
        "pk", "session_id", "finished_at", "tokens_before", "tokens_after"
    ).iterator(chunk_size=CHUNK):
        in_force = Q(compacted_id=pk) | Q(created_at__gte=finished_at) if finished_at else Q(compacted_id=pk)
        if before != after:
            ProviderRequest.objects.filter(in_force, session_id=session_id).update(
                saved_tokens=F("saved_tokens") + (before - after)
            )
    buckets = defaultdict(lambda: [0] * len(SUMS))
    fields = (
        "project_id",
        "created_at",
        "user_id",
        "api_key_id",
        "model",
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "output_tokens",
        "cost_usd",
        "saved_tokens",
    )
    for project_id, at, user_id, key_id, model, *tokens, cost, saved in (
        ProviderRequest.objects.order_by().values_list(*fields).iterator(chunk_size=CHUNK)
    ):
        sums = buckets[(project_id, at.astimezone(UTC).date(), user_id or 0, key_id or 0, model)]
        figures = (1, cost is None, *tokens, 0 if cost is None else int(Decimal(cost) * COST_UNITS), saved)
        for n, value in enumerate(figures):
            sums[n] += value
    DailySpend.objects.bulk_create(
        (
            DailySpend(project_id=p, day=d, user_id=u, api_key_id=k, model=m, **dict(zip(SUMS, sums)))
            for (p, d, u, k, m), sums in buckets.items()
        ),
        batch_size=CHUNK,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0035_request_estimated"),
    ]

    operations = [
        migrations.AddField(
            model_name="providerrequest",
            name="saved_tokens",
            field=models.BigIntegerField(
                default=0, help_text="Input tokens the compactions in force when it arrived kept out of it."
            ),
        ),
        migrations.CreateModel(
            name="DailySpend",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("day", models.DateField()),
                ("user_id", models.BigIntegerField(default=0)),
                ("api_key_id", models.BigIntegerField(default=0)),
                ("model", models.CharField(blank=True, max_length=200)),
                ("requests", models.BigIntegerField(default=0)),
                ("unpriced_requests", models.BigIntegerField(default=0)),
                ("input_tokens", models.BigIntegerField(default=0)),
                ("cache_creation_input_tokens", models.BigIntegerField(default=0)),
                ("cache_read_input_tokens", models.BigIntegerField(default=0)),
                ("output_tokens", models.BigIntegerField(default=0)),
                ("cost_units", models.BigIntegerField(default=0, help_text="The priced requests' cost, in 1e-10 USD.")),
                ("saved_tokens", models.BigIntegerField(default=0)),
                (
                    "project",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="sessions_app.project",
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("project", "day", "user_id", "api_key_id", "model"), name="daily_spend_bucket"
                    )
                ],
            },
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name="agentsession",
            index=models.Index(
                condition=models.Q(("level", ""), ("usage_percent__isnull", True), _connector="OR"),
                fields=["project", "status"],
                name="session_unleveled",
            ),
        ),
    ]
