"""Notifications: a project's webhooks, and the outbox of what each was sent (one row per event and
webhook, delivered by Celery with retries; every HTTP attempt logged)."""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models

from sessions_app.models.projects import Project


class WebhookEvent(models.TextChoices):
    LEVEL_CHANGED = "session.level_changed", "A session's level changed"
    COMPACTION_SUCCEEDED = "compaction.succeeded", "A compaction succeeded"
    COMPACTION_FAILED = "compaction.failed", "A compaction failed"
    HANDOFF_WRITTEN = "handoff.written", "A handoff document was written"
    SESSION_PAUSED = "session.paused", "Automatic compaction paused for a session"
    BUDGET_WARNING = "budget.warning", "A budget reached 80 % of its limit this period"
    BUDGET_EXCEEDED = "budget.exceeded", "A budget reached its limit this period"


TEST_EVENT = "test"  # the "Send test" button's; not something to subscribe to


class WebhookFormat(models.TextChoices):
    JSON = "json", "JSON (signed ctxweb payload)"
    SLACK = "slack", 'Slack-compatible ({"text": …})'


def new_secret() -> str:
    return secrets.token_urlsafe(32)


class Webhook(models.Model):
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="webhooks")
    name = models.CharField(max_length=100, blank=True)
    url = models.URLField(max_length=2000, help_text="Where events are POSTed (http or https).")
    secret = models.CharField(
        max_length=100, default=new_secret, help_text="Signs every request: X-Ctxweb-Signature (HMAC-SHA256)."
    )
    events = models.JSONField(default=list, help_text="Event names this webhook receives.")
    format = models.CharField(max_length=10, choices=WebhookFormat.choices, default=WebhookFormat.JSON)
    enabled = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.name or self.url


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"  # waiting for its (next) attempt
    SENDING = "sending"  # claimed by a worker
    DELIVERED = "delivered"
    FAILED = "failed"  # given up: the attempts ran out, or the URL may not be called


class WebhookDelivery(models.Model):
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries", db_index=False)
    event = models.CharField(max_length=40)
    payload = models.JSONField(help_text="The body sent, the same on every attempt.")
    status = models.CharField(max_length=10, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_status_code = models.PositiveIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-pk"]
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(
                fields=["next_attempt_at"], name="delivery_due", condition=models.Q(status=DeliveryStatus.PENDING)
            ),
            models.Index(fields=["webhook", "-created_at"], name="delivery_webhook_created"),
        ]

    def __str__(self) -> str:
        return f"{self.event} to webhook {self.webhook_id} ({self.status})"


class WebhookAttempt(models.Model):
    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="log")
    at = models.DateTimeField()
    status_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"attempt at {self.at:%Y-%m-%d %H:%M:%S}: {self.status_code or self.error}"
