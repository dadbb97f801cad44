"""Delivering webhook events: claim a due delivery (a conditional UPDATE, so one worker sends it),
POST it outside any transaction, log the attempt, and either finish it or schedule the next attempt
with exponential backoff. Only a 2xx answer counts as delivered; redirects are not followed."""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from sessions_app import metrics
from sessions_app.models import DeliveryStatus, WebhookAttempt, WebhookDelivery
from sessions_app.services import webhook_http
from sessions_app.services.webhook_urls import UrlRefused, url_check

log = logging.getLogger(__name__)
USER_AGENT = "ctxweb-webhooks/1"
DUE_BATCH = 200


@dataclass(frozen=True)
class Outcome:
    result: str  # "delivered", "retry", "failed" or "skipped" (someone else has it, or it isn't due)
    retry_in: float = 0.0


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """``X-Ctxweb-Signature``: ``sha256=`` and the hex HMAC-SHA256 of ``timestamp + "." + body`` (the
    timestamp is signed so a captured request can't be replayed later as new)."""
    mac = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def delivery_attempt(delivery_id: int, *, now: datetime | None = None) -> Outcome:
    now = now or timezone.now()
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=DeliveryStatus.PENDING, next_attempt_at__lte=now
    ).update(status=DeliveryStatus.SENDING, claimed_at=now)
    if not claimed:
        return Outcome("skipped")
    delivery = WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)
    webhook = delivery.webhook
    body = json.dumps(delivery.payload, separators=(",", ":"), ensure_ascii=False).encode()
    started = time.monotonic()
    code, error, permanent = None, "", False
    if not webhook.enabled:
        error, permanent = "The webhook is disabled.", True
    else:
        try:
            address = url_check(webhook.url, sending=True)
            code = webhook_http.post(
                webhook.url,
                body,
                _headers(webhook.secret, delivery, body),
                address=address,
                timeout=settings.CTX_WEBHOOK_TIMEOUT_SECONDS,
            )
        except UrlRefused as exc:
            error, permanent = exc.detail, True
        except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, bad answer
            error = f"{type(exc).__name__}: {exc}"[:500] or type(exc).__name__
    elapsed = int((time.monotonic() - started) * 1000)
    if code is not None and not 200 <= code < 300:
        error = f"HTTP {code}"
    return _record(delivery, code=code, error=error, permanent=permanent, duration_ms=elapsed)


def _headers(secret: str, delivery: WebhookDelivery, body: bytes) -> dict[str, str]:
    timestamp = str(int(time.time()))
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Ctxweb-Event": delivery.event,
        "X-Ctxweb-Delivery": str(delivery.pk),
        "X-Ctxweb-Timestamp": timestamp,
        "X-Ctxweb-Signature": signature(secret, timestamp, body),
    }


def _record(delivery: WebhookDelivery, *, code: int | None, error: str, permanent: bool, duration_ms: int) -> Outcome:
    now = timezone.now()
    delivered = code is not None and 200 <= code < 300
    attempts = delivery.attempts + 1
    with transaction.atomic():
        WebhookAttempt.objects.create(
            delivery=delivery, at=now, status_code=code, error=error[:500], duration_ms=duration_ms
        )
        fields: dict[str, object] = {
            "attempts": attempts,
            "last_status_code": code,
            "last_error": error[:500],
            "claimed_at": None,
        }
        if delivered:
            outcome = Outcome("delivered")
            fields.update(status=DeliveryStatus.DELIVERED, delivered_at=now)
        elif permanent or attempts >= settings.CTX_WEBHOOK_MAX_ATTEMPTS:
            outcome = Outcome("failed")
            fields.update(status=DeliveryStatus.FAILED)
        else:
            wait = settings.CTX_WEBHOOK_BACKOFF_SECONDS * 2 ** (attempts - 1)
            outcome = Outcome("retry", wait)
            fields.update(status=DeliveryStatus.PENDING, next_attempt_at=now + timedelta(seconds=wait))
        WebhookDelivery.objects.filter(pk=delivery.pk, status=DeliveryStatus.SENDING).update(**fields)
    metrics.webhook_attempted(outcome=outcome.result)
    if not delivered:
        log.info(
            "webhook delivery %s (%s): attempt %s: %s -> %s", delivery.pk, delivery.event, attempts, error, outcome
        )
    return outcome


def any_due() -> bool:
    """Whether a delivery waits to be sent (one index probe): most compactions record none."""
    return WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=timezone.now()).exists()


def deliveries_due(*, now: datetime | None = None) -> list[int]:
    """Pending deliveries whose time has come (oldest first), after reclaiming ones a worker claimed
    and never finished (it died mid-request): those become pending again."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.CTX_WEBHOOK_TIMEOUT_SECONDS * 3 + 30)
    WebhookDelivery.objects.filter(status=DeliveryStatus.SENDING, claimed_at__lt=stale).update(
        status=DeliveryStatus.PENDING, claimed_at=None
    )
    due = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)
    return list(due.order_by("next_attempt_at", "pk").values_list("pk", flat=True)[:DUE_BATCH])
