"""What providers answered: one row per request a model read (a proxied exchange, or a response a
recorded transcript reports), with what it used by kind of token, what that cost, and how long it took."""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models

from sessions_app.models.compactions import Compaction
from sessions_app.models.projects import ApiKey, Project
from sessions_app.models.sessions import AgentSession


class RequestSource(models.TextChoices):
    PROXY = "proxy", "Proxied by ctxweb"
    TRANSCRIPT = "transcript", "Reported by a recorded transcript"


class ProviderRequest(models.Model):
    # One per exchange, made when the request arrives: a recording that runs twice writes one row. A
    # transcript's response: derived from its session and response id, whatever reads it how often.
    key = models.UUIDField(unique=True, editable=False)
    # The indexes below lead with these two (db_index=False: their own would be redundant).
    session = models.ForeignKey(AgentSession, on_delete=models.CASCADE, related_name="requests", db_index=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="provider_requests", db_index=False)
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(
        help_text="When the request reached ctxweb; a transcript's: when its response began."
    )
    model = models.CharField(max_length=200, blank=True, help_text="The answer's model, else the request's.")
    # Anthropic's split: ``input_tokens`` is what the model read uncached; 0 when not reported.
    input_tokens = models.PositiveBigIntegerField(default=0)
    cache_creation_input_tokens = models.PositiveBigIntegerField(default=0)
    cache_read_input_tokens = models.PositiveBigIntegerField(default=0)
    output_tokens = models.PositiveBigIntegerField(default=0)
    service_tier = models.CharField(max_length=50, blank=True)
    cost_usd = models.DecimalField(
        max_digits=20, decimal_places=10, null=True, blank=True, help_text="None: the model has no price."
    )
    ttfb_ms = models.FloatField(null=True, blank=True, help_text="From arrival to the upstream's first byte.")
    duration_ms = models.FloatField(null=True, blank=True, help_text="From arrival to the upstream's last byte.")
    status = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="The upstream's HTTP status; None: a transcript's (it records none)."
    )
    compacted = models.ForeignKey(
        Compaction,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="The compaction whose context went upstream in place of the agent's history.",
    )
    source = models.CharField(max_length=20, choices=RequestSource.choices, default=RequestSource.PROXY)
    estimated = models.BooleanField(
        default=False,
        help_text="The upstream reported no usage (an OpenAI stream without include_usage): the tokens and "
        "cost are ctxweb's estimate of the request and its reply.",
    )
    # Kept equal to selectors.savings' definition by the services that record a row and that move a
    # compaction in or out of force (services/spend_rollup.py); may be negative, as a compaction's may.
    saved_tokens = models.BigIntegerField(
        default=0, help_text="Input tokens the compactions in force when it arrived kept out of it."
    )

    class Meta:
        indexes = [
            models.Index(fields=["session", "created_at"], name="request_session_created"),
            models.Index(fields=["project", "created_at"], name="request_project_created"),
        ]

    def __str__(self) -> str:
        return f"{self.model} {self.status or self.source} at {self.created_at:%Y-%m-%d %H:%M:%S}"


# A ``DailySpend`` row's cost in integer units of 1e-10 USD (``ProviderRequest.cost_usd``'s places):
# sums that stay exact on SQLite as on Postgres.
COST_UNITS = 10**10
_PLACES = Decimal(1).scaleb(-10)


def cost_from_units(units: int) -> Decimal:
    """A rollup's cost (1e-10 USD units) in dollars, to ``ProviderRequest.cost_usd``'s places."""
    return (Decimal(units) / COST_UNITS).quantize(_PLACES)


class DailySpend(models.Model):
    """The sums of a project's ``ProviderRequest`` rows per UTC day (of ``created_at``), user, API key
    and model, moved by the services that write those rows, in the same transaction: what the
    project's spend, the dashboard and budgets read instead of the rows. ``user_id`` and ``api_key_id``
    are plain ids, 0 for none (one bucket for "none" on every database: a unique constraint holds
    NULLs distinct); a deleted user's or key's id stays, and readers fold it into "none" as the rows'
    ``SET_NULL`` does."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    user_id = models.BigIntegerField(default=0)
    api_key_id = models.BigIntegerField(default=0)
    model = models.CharField(max_length=200, blank=True)
    requests = models.BigIntegerField(default=0)
    unpriced_requests = models.BigIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    cache_creation_input_tokens = models.BigIntegerField(default=0)
    cache_read_input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cost_units = models.BigIntegerField(default=0, help_text="The priced requests' cost, in 1e-10 USD.")
    saved_tokens = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "day", "user_id", "api_key_id", "model"], name="daily_spend_bucket"
            )
        ]

    def __str__(self) -> str:
        return f"{self.project_id} {self.day} {self.model}: {self.requests} requests"
