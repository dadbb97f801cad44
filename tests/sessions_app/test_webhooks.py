"""Webhooks against a local receiver: each event once, on the real transitions; the signature checks
out with the secret; retries with a log of status codes; giving up; a hung receiver; Slack's format;
addresses a webhook may not call; and who may manage them (nothing written on a refusal)."""

from __future__ import annotations

import hashlib
import hmac
import io
import itertools
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from sessions_app import tasks
from sessions_app.models import Compaction, Webhook, WebhookAttempt, WebhookDelivery
from sessions_app.services import compaction_records, compaction_runs, webhook_delivery, webhook_http, webhook_urls
from tests.sessions_app.compaction_helpers import agent_rounds, append
from tests.sessions_app.webhook_receiver import receiver

pytestmark = pytest.mark.django_db

ALL = ["session.level_changed", "compaction.succeeded", "compaction.failed", "handoff.written", "session.paused"]


def add_hook(api, project, url, events=None, **extra) -> dict:
    response = api.post(f"/api/v1/projects/{project.pk}/webhooks/", {"url": url, "events": events or ALL, **extra})
    assert response.status_code == 201, response.content
    return response.json()


def verified(request, secret: str) -> dict:
    """The request's body, after checking its signature the way docs/WEBHOOKS.md tells receivers to."""
    timestamp = request.headers["X-Ctxweb-Timestamp"]
    expected = (
        "sha256=" + hmac.new(secret.encode(), timestamp.encode() + b"." + request.body, hashlib.sha256).hexdigest()
    )
    assert hmac.compare_digest(request.headers["X-Ctxweb-Signature"], expected)
    assert abs(int(timestamp) - timezone.now().timestamp()) < 60
    return request.json


def resend() -> dict:
    out = io.StringIO()
    call_command("ctx", "webhooks", "--json", stdout=out)
    return json.loads(out.getvalue())


def test_a_compaction_is_announced_once_signed_with_the_secret(team, api_as, session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, agent_rounds(24))
    with receiver() as rx:
        hook = add_hook(api_as(team.alice), team.project, rx.url, events=["compaction.succeeded"])
        response = api_as(team.bob).post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": "compact"})
        record = response.json()
        (request,) = rx.wait_for(1)
    body = verified(request, hook["secret"])
    assert request.headers["X-Ctxweb-Event"] == "compaction.succeeded"
    assert body["event"] == "compaction.succeeded"
    assert body["project"] == {"id": team.project.pk, "name": team.project.name}
    assert body["session"]["id"] == session.pk and body["session"]["url"].endswith(f"/sessions/{session.pk}/")
    assert body["data"]["compaction"] == record["id"]
    assert body["data"]["saved_tokens"] == record["tokens_before"] - record["tokens_after"] > 0
    delivery = WebhookDelivery.objects.get(pk=int(request.headers["X-Ctxweb-Delivery"]))
    assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("delivered", 1, 200)
    assert list(delivery.log.values_list("status_code", flat=True)) == [200]


def test_level_changes_are_announced_once_each_in_order(team, api_as, session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=12_000, auto_compact=False)
    with receiver() as rx:
        add_hook(api_as(team.alice), team.project, rx.url, events=["session.level_changed"])
        levels = []
        for n in range(12):
            append(session, agent_rounds(1, start=n, seed=n, output_lines=40))
            session.refresh_from_db()
            if session.level and (not levels or levels[-1] != session.level):
                levels.append(session.level)
        bodies = [r.json for r in rx.wait_for(len(levels) - 1)]
    assert len(levels) >= 3, levels  # the window is small enough to cross several thresholds
    assert [(b["data"]["from"], b["data"]["to"]) for b in bodies] == list(itertools.pairwise(levels))
    assert all(b["event"] == "session.level_changed" for b in bodies)


def test_failures_are_announced_and_the_pause_once(team, api_as, session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000)
    append(session, agent_rounds(10))
    with receiver() as rx:
        add_hook(api_as(team.alice), team.project, rx.url, events=["compaction.failed", "session.paused"])
        for n in range(4):
            record = compaction_runs.compaction_request(session=session, level="summarize", user=None, trigger="auto")
            compaction_records.compaction_fail(record.pk, f"model error {n}")
            tasks.webhooks_send()
        bodies = [r.json for r in rx.wait_for(5)]
    events = [b["event"] for b in bodies]
    assert events.count("compaction.failed") == 4
    assert events.count("session.paused") == 1
    paused = next(b for b in bodies if b["event"] == "session.paused")
    assert paused["data"]["failures_in_a_row"] == 3 and paused["data"]["error"] == "model error 2"


def test_a_handoff_is_announced_with_its_download(team, api_as, session_of):
    session = session_of(model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, agent_rounds(6))
    with receiver() as rx:
        add_hook(api_as(team.alice), team.project, rx.url, events=["handoff.written"])
        document = api_as(team.bob).post(f"/api/v1/sessions/{session.pk}/handoff/", {"continue": True}).json()
        (request,) = rx.wait_for(1)
    data = request.json["data"]
    assert data["handoff"] == document["id"]
    assert data["continuation"] == document["continuation"] is not None
    assert data["download"].endswith(f"/api/v1/handoffs/{document['id']}/download/")


def test_retries_log_each_status_until_delivered(team, api_as):
    with receiver([500, 500, 200]) as rx:
        hook = add_hook(api_as(team.alice), team.project, rx.url)
        sent = api_as(team.alice).post(f"/api/v1/webhooks/{hook['id']}/test/")
        assert sent.status_code == 202
        delivery = WebhookDelivery.objects.get(pk=sent.json()["id"])
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.last_status_code) == ("pending", 1, 500)
        assert resend()["retry"] == 1
        assert resend() == {"sent": 1, "delivered": 1, "retry": 0, "failed": 0}
        assert len(rx.requests) == 3
    log = api_as(team.alice).get(f"/api/v1/webhooks/{hook['id']}/deliveries/").json()["results"]
    assert [a["status_code"] for a in log[0]["log"]] == [500, 500, 200]
    assert log[0]["status"] == "delivered"
    # Every attempt carried the same body (and its own timestamp and signature).
    assert len({r.body for r in rx.requests}) == 1
    assert all(verified(r, hook["secret"])["event"] == "test" for r in rx.requests)


def test_it_gives_up_after_the_last_attempt(team, api_as, settings):
    settings.CTX_WEBHOOK_MAX_ATTEMPTS = 3
    with receiver([500] * 10) as rx:
        hook = add_hook(api_as(team.alice), team.project, rx.url)
        delivery_id = api_as(team.alice).post(f"/api/v1/webhooks/{hook['id']}/test/").json()["id"]
        resend(), resend()
        assert resend()["sent"] == 0
        assert len(rx.requests) == 3
    delivery = WebhookDelivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.attempts, delivery.last_error) == ("failed", 3, "HTTP 500")


def test_a_hung_receiver_times_out_and_is_tried_again(team, api_as, settings):
    settings.CTX_WEBHOOK_TIMEOUT_SECONDS = 0.5
    with receiver(["hang"]) as rx:
        hook = add_hook(api_as(team.alice), team.project, rx.url)
        delivery_id = api_as(team.alice).post(f"/api/v1/webhooks/{hook['id']}/test/").json()["id"]
        (attempt,) = WebhookAttempt.objects.filter(delivery_id=delivery_id)
        assert attempt.status_code is None and "timed out" in attempt.error.lower()
        assert 400 <= attempt.duration_ms < 2000
        assert resend()["delivered"] == 1


def test_a_receiver_that_never_answers_is_given_up_each_attempt_logged(team, api_as, settings):
    settings.CTX_WEBHOOK_MAX_ATTEMPTS = 3
    settings.CTX_WEBHOOK_TIMEOUT_SECONDS = 0.3
    with receiver(["hang"] * 5) as rx:
        hook = add_hook(api_as(team.alice), team.project, rx.url)
        delivery_id = api_as(team.alice).post(f"/api/v1/webhooks/{hook['id']}/test/").json()["id"]
        resend(), resend()
        assert resend()["sent"] == 0
        assert len(rx.requests) == 3
    delivery = WebhookDelivery.objects.get(pk=delivery_id)
    assert (delivery.status, delivery.attempts, delivery.delivered_at) == ("failed", 3, None)
    attempts = list(delivery.log.all())
    assert len(attempts) == 3 and all(a.status_code is None and "timed out" in a.error.lower() for a in attempts)


def test_slack_format_is_one_line_of_text(team, api_as, session_of):
    session = session_of(name="Refactor bot", model="claude-sonnet-4-5", context_window=30_000, auto_compact=False)
    append(session, agent_rounds(24))
    with receiver() as rx:
        add_hook(api_as(team.alice), team.project, rx.url, events=["compaction.succeeded"], format="slack")
        api_as(team.bob).post(f"/api/v1/sessions/{session.pk}/compactions/", {"level": "compact"})
        (request,) = rx.wait_for(1)
    assert set(request.json) == {"text"}
    assert "Refactor bot" in request.json["text"] and "saved" in request.json["text"]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://10.1.2.3/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://localhost/hook",
        "http://0.0.0.0/hook",
        "ftp://example.com/hook",
        "http://user:pass@example.com/hook",
        "javascript:alert(1)",
        "not a url",
    ],
)
def test_private_and_odd_addresses_are_refused_in_production(team, api_as, settings, url):
    settings.CTX_WEBHOOK_ALLOW_PRIVATE = False
    response = api_as(team.alice).post(f"/api/v1/projects/{team.project.pk}/webhooks/", {"url": url, "events": ALL})
    assert (response.status_code, response.json()["code"]) == (400, "invalid_url"), response.content
    assert not Webhook.objects.exists()


def test_a_webhook_that_now_points_inside_is_not_called(team, api_as, settings):
    with receiver() as rx:
        hook = add_hook(api_as(team.alice), team.project, rx.url)
        settings.CTX_WEBHOOK_ALLOW_PRIVATE = False
        delivery_id = api_as(team.alice).post(f"/api/v1/webhooks/{hook['id']}/test/").json()["id"]
        assert rx.requests == []
    delivery = WebhookDelivery.objects.get(pk=delivery_id)
    assert delivery.status == "failed" and "private" in delivery.last_error


def test_only_project_admins_manage_webhooks(team, api_as, client):
    with receiver() as rx:
        hook = add_hook(api_as(team.alice), team.project, rx.url)
    for persona, code in ((team.bob, 403), (team.carol, 403), (team.mallory, 404)):
        api = api_as(persona)
        assert api.get(f"/api/v1/projects/{team.project.pk}/webhooks/").status_code == code
        assert (
            api.post(f"/api/v1/projects/{team.project.pk}/webhooks/", {"url": rx.url, "events": ALL}).status_code
            == code
        )
        assert api.get(f"/api/v1/webhooks/{hook['id']}/").status_code == code
        assert api.patch(f"/api/v1/webhooks/{hook['id']}/", {"url": "http://example.com/x"}).status_code == code
        assert api.post(f"/api/v1/webhooks/{hook['id']}/test/").status_code == code
        assert api.get(f"/api/v1/webhooks/{hook['id']}/deliveries/").status_code == code
        assert api.delete(f"/api/v1/webhooks/{hook['id']}/").status_code == code
        client.force_login(persona.user)
        assert client.get(f"/projects/{team.project.pk}/settings/webhooks/").status_code == code
        assert client.post(f"/webhooks/{hook['id']}/test/").status_code == code
        assert client.post(f"/webhooks/{hook['id']}/delete/").status_code == code
    assert Webhook.objects.count() == 1 and Webhook.objects.get().url == rx.url
    assert not WebhookDelivery.objects.exists()
    client.force_login(team.alice.user)
    page = client.get(f"/projects/{team.project.pk}/settings/webhooks/").content.decode()
    assert hook["secret"] in page and "Send test" in page


@pytest.mark.parametrize(
    "body, code",
    [
        ({"url": "http://example.com/h", "events": []}, "invalid_events"),
        ({"url": "http://example.com/h", "events": ["compaction.exploded"]}, "invalid_events"),
        ({"url": "http://example.com/h", "events": "compaction.failed"}, "invalid_events"),
        ({"url": "http://example.com/h", "events": ALL, "format": "xml"}, "invalid_format"),
        ({"events": ALL}, "invalid_url"),
        ({"url": "x" * 3000, "events": ALL}, "invalid_url"),
    ],
)
def test_bad_webhooks_are_refused_with_a_code(team, api_as, body, code):
    response = api_as(team.alice).post(f"/api/v1/projects/{team.project.pk}/webhooks/", body)
    assert response.status_code == 400, response.content
    assert response.json()["code"] == code and response.json()["detail"]
    assert not Webhook.objects.exists()


def test_the_settings_page_adds_edits_tests_and_deletes(team, client):
    client.force_login(team.alice.user)
    with receiver() as rx:
        response = client.post(
            f"/projects/{team.project.pk}/settings/webhooks/new/",
            {
                "name": "ops",
                "url": rx.url,
                "events": ["compaction.failed", "session.paused"],
                "format": "json",
                "enabled": "on",
            },
        )
        assert response.status_code == 302
        hook = Webhook.objects.get()
        assert (hook.name, hook.events, hook.enabled) == ("ops", ["compaction.failed", "session.paused"], True)
        secret = hook.secret
        prefix = f"w{hook.pk}"
        response = client.post(
            f"/webhooks/{hook.pk}/",
            {
                f"{prefix}-name": "ops",
                f"{prefix}-url": rx.url,
                f"{prefix}-events": ["session.paused"],
                f"{prefix}-format": "slack",
                "rotate_secret": "on",
            },
        )
        assert response.status_code == 302
        hook.refresh_from_db()
        assert (hook.events, hook.format, hook.enabled) == (["session.paused"], "slack", False)
        assert hook.secret != secret
        assert client.post(f"/webhooks/{hook.pk}/test/").status_code == 302
        assert WebhookDelivery.objects.get().status == "failed"  # a disabled webhook is not called
        assert rx.requests == []
        assert client.post(f"/webhooks/{hook.pk}/delete/").status_code == 302
    assert not Webhook.objects.exists()
    bad = client.post(
        f"/projects/{team.project.pk}/settings/webhooks/new/",
        {"url": "gopher://x", "events": ["session.paused"], "format": "json"},
    )
    assert bad.status_code == 400 and not Webhook.objects.exists()


def test_stale_claims_are_sent_again(team, api_as):
    with receiver([500]) as rx:
        hook = add_hook(api_as(team.alice), team.project, rx.url)
        delivery_id = api_as(team.alice).post(f"/api/v1/webhooks/{hook['id']}/test/").json()["id"]
        # A worker claimed it and died mid-request:
        WebhookDelivery.objects.filter(pk=delivery_id).update(
            status="sending", claimed_at=timezone.now() - timedelta(minutes=10)
        )
        assert webhook_delivery.deliveries_due() == [delivery_id]
        assert resend()["delivered"] == 1
    assert Compaction.objects.count() == 0


def test_the_request_goes_to_the_address_that_was_checked(team, api_as, settings, monkeypatch):
    """DNS rebinding: a name that resolves to a public address for the check and to a private one a
    moment later must not reach the private one — the sender connects to the checked address."""
    settings.CTX_WEBHOOK_ALLOW_PRIVATE = False
    answers = iter(["93.184.216.34"] + ["127.0.0.1"] * 10)

    def lookup(host, port, *args, **kwargs):
        return [(2, 1, 6, "", (next(answers), port))]

    connected: list[tuple[str, int]] = []

    def connect(address, timeout=None, *args, **kwargs):
        connected.append(address)
        raise ConnectionRefusedError("not in a test")

    monkeypatch.setattr(webhook_urls.socket, "getaddrinfo", lookup)
    hook = add_hook(api_as(team.alice), team.project, "http://hooks.example.com/ctxweb")
    answers = iter(["93.184.216.34"] + ["127.0.0.1"] * 10)  # the save looked the name up once
    monkeypatch.setattr(webhook_http.socket, "create_connection", connect)
    delivery_id = api_as(team.alice).post(f"/api/v1/webhooks/{hook['id']}/test/").json()["id"]
    assert connected == [("93.184.216.34", 80)]
    attempt = WebhookAttempt.objects.get(delivery_id=delivery_id)
    assert attempt.status_code is None and "ConnectionRefusedError" in attempt.error
