"""Spending limits: a project's, or one API key's within it, per UTC day or month, with the periods
whose 80 % and 100 % have been announced (``budget.warning``, ``budget.exceeded``)."""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MinValueValidator
from django.db import models

from sessions_app.models.projects import ApiKey, Project


class BudgetPeriod(models.TextChoices):
    DAY = "day", "Daily (UTC calendar day)"
    MONTH = "month", "Monthly (UTC calendar month)"


class Budget(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="budgets", db_index=False)
    api_key = models.ForeignKey(
        ApiKey,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="budgets",
        help_text="Empty: the whole project's spend; else what this key spent in the project.",
    )
    period = models.CharField(max_length=10, choices=BudgetPeriod.choices, default=BudgetPeriod.DAY)
    limit_usd = models.DecimalField(
        max_digits=12, decimal_places=2, validators=[MinValueValidator(Decimal("0.01"))], help_text="US dollars."
    )
    refuse = models.BooleanField(
        default=False,
        help_text="The proxy answers 429 instead of forwarding once the period's spend reaches the limit.",
    )
    # The start of the period whose 80 % / 100 % was announced: claimed by a conditional UPDATE, so
    # concurrent recorders announce each crossing once. ``exceeded_period`` is also what the proxy's
    # refusal reads (one indexed query).
    warned_period = models.DateField(null=True, blank=True, editable=False)
    exceeded_period = models.DateField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            # Two partial constraints: NULLs are distinct in a plain unique one (one per project-wide period).
            models.UniqueConstraint(
                fields=["project", "period"], condition=models.Q(api_key__isnull=True), name="budget_project_unique"
            ),
            models.UniqueConstraint(
                fields=["project", "api_key", "period"],
                condition=models.Q(api_key__isnull=False),
                name="budget_key_unique",
            ),
            models.CheckConstraint(condition=models.Q(limit_usd__gt=0), name="budget_limit_positive"),
        ]
        indexes = [models.Index(fields=["project", "api_key"], name="budget_project_key")]

    def __str__(self) -> str:
        scope = f"key {self.api_key_id}" if self.api_key_id else "project"
        return f"{self.period} budget of ${self.limit_usd} for {scope} of project {self.project_id}"
