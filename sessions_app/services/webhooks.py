"""A project's webhooks, managed by its admins (settings page, REST, Django admin): create, change,
delete, and "send test". Every input is checked before anything is written."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from sessions_app.errors import InvalidInput
from sessions_app.models import (
    TEST_EVENT,
    Project,
    Webhook,
    WebhookDelivery,
    WebhookEvent,
    WebhookFormat,
)
from sessions_app.models.webhooks import new_secret
from sessions_app.services.webhook_events import slack_payload
from sessions_app.services.webhook_urls import UrlRefused, url_check

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

MAX_WEBHOOKS_PER_PROJECT = 20


def webhook_create(
    *,
    project: Project,
    user: User | None,
    url: str,
    events: Sequence[str],
    name: str = "",
    format: str = WebhookFormat.JSON,
    enabled: bool = True,
) -> Webhook:
    clean = webhook_fields_check(url=url, events=events, name=name, format=format)
    with transaction.atomic():
        if Webhook.objects.select_for_update().filter(project=project).count() >= MAX_WEBHOOKS_PER_PROJECT:
            raise InvalidInput(f"A project has at most {MAX_WEBHOOKS_PER_PROJECT} webhooks.", code="too_many_webhooks")
        return Webhook.objects.create(project=project, created_by=user, enabled=enabled, **clean)


def webhook_update(*, webhook: Webhook, rotate_secret: bool = False, **changes: Any) -> Webhook:
    """``changes``: any of url, events, name, format, enabled."""
    merged = {
        "url": changes.get("url", webhook.url),
        "events": changes.get("events", webhook.events),
        "name": changes.get("name", webhook.name),
        "format": changes.get("format", webhook.format),
    }
    clean = webhook_fields_check(**merged)
    for key, value in clean.items():
        setattr(webhook, key, value)
    if "enabled" in changes:
        webhook.enabled = bool(changes["enabled"])
    if rotate_secret:
        webhook.secret = new_secret()
    webhook.save()
    return webhook


def webhook_delete(*, webhook: Webhook) -> None:
    webhook.delete()


def webhook_test(*, webhook: Webhook, user: User | None) -> WebhookDelivery:
    """A ``test`` delivery to this webhook alone, sent like any other (the caller sends it on commit)."""
    who = getattr(user, "username", "") or "someone"
    body = {
        "event": TEST_EVENT,
        "created_at": timezone.now().isoformat(),
        "project": {"id": webhook.project_id, "name": webhook.project.name},
        "session": None,
        "data": {"message": f"A test from ctxweb, sent by {who}: this webhook works."},
    }
    return WebhookDelivery.objects.create(
        webhook=webhook,
        event=TEST_EVENT,
        payload=slack_payload(body) if webhook.format == WebhookFormat.SLACK else body,
        next_attempt_at=timezone.now(),
    )


def webhook_fields_check(*, url: str, events: Sequence[str], name: str, format: str) -> dict[str, Any]:
    if not isinstance(url, str) or not url.strip() or len(url) > 2000:
        raise InvalidInput("A URL of at most 2,000 characters is required.", code="invalid_url", field="url")
    try:
        url_check(url.strip())
    except UrlRefused as exc:
        raise InvalidInput(exc.detail, code="invalid_url", field="url") from None
    known = set(WebhookEvent.values)
    if not isinstance(events, list | tuple) or not events or not all(isinstance(e, str) and e in known for e in events):
        raise InvalidInput(
            f"events is a non-empty list of: {', '.join(WebhookEvent.values)}.", code="invalid_events", field="events"
        )
    if format not in WebhookFormat.values:
        raise InvalidInput(f"format is one of: {', '.join(WebhookFormat.values)}.", code="invalid_format")
    if not isinstance(name, str) or len(name) > 100:
        raise InvalidInput("name has at most 100 characters.", code="invalid_name", field="name")
    ordered = [e for e in WebhookEvent.values if e in set(events)]
    return {"url": url.strip(), "events": ordered, "name": name.strip(), "format": format}
