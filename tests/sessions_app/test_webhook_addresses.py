"""An IPv6 address that carries an IPv4 one is judged by that one: IPv4-mapped, IPv4-compatible,
NAT64 (64:ff9b::/96, and the local-use 64:ff9b:1::/48 as a whole), 6to4 and Teredo forms of a
private address are refused when a webhook is saved, and again when a name resolves to one of them
at delivery time (DNS rebinding); the same forms of a public address are not refused."""

from __future__ import annotations

import pytest

from sessions_app.models import Webhook, WebhookAttempt
from sessions_app.services import webhook_http, webhook_urls

pytestmark = pytest.mark.django_db

PRIVATE_FORMS = [
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:7f00:1",
    "::127.0.0.1",  # IPv4-compatible
    "::10.0.0.1",
    "::169.254.169.254",
    "64:ff9b::127.0.0.1",  # NAT64, the well-known prefix
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::192.168.1.1",
    "64:ff9b:1::127.0.0.1",  # local-use NAT64, /96 layout
    "64:ff9b:1:7f00:0:100::",  # local-use NAT64, /48 layout (127.0.0.1 around the u octet)
    "64:ff9b:1::8.8.8.8",  # local-use NAT64 is this network's translator, whatever it carries
    "2002:7f00:1::",  # 6to4
    "2002:a00:1::1",
    "2002:a9fe:a9fe::",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo
    "2001:0:808:808:0:0:80ff:fffe",  # Teredo with public server, client 127.0.0.1
    "::ffff:0:127.0.0.1",  # IPv4-translated (SIIT)
    "::ffff:0:10.0.0.1",
    "::ffff:0:169.254.169.254",
]
PUBLIC_FORMS = ["::ffff:8.8.8.8", "::8.8.8.8", "64:ff9b::8.8.8.8", "2002:808:808::1", "2606:4700:4700::1111"]


def add(api, project, url: str):
    return api.post(f"/api/v1/projects/{project.pk}/webhooks/", {"url": url, "events": ["session.paused"]})


@pytest.mark.parametrize("address", PRIVATE_FORMS)
def test_ipv6_forms_of_a_private_ipv4_address_are_refused(team, api_as, settings, address):
    settings.CTX_WEBHOOK_ALLOW_PRIVATE = False
    response = add(api_as(team.alice), team.project, f"http://[{address}]/hook")
    assert (response.status_code, response.json()["code"]) == (400, "invalid_url"), response.content
    assert not Webhook.objects.exists()


@pytest.mark.parametrize("address", PUBLIC_FORMS)
def test_ipv6_forms_of_a_public_address_are_accepted(team, api_as, settings, address):
    settings.CTX_WEBHOOK_ALLOW_PRIVATE = False
    assert add(api_as(team.alice), team.project, f"http://[{address}]:8443/hook").status_code == 201


@pytest.mark.parametrize("address", ["64:ff9b::127.0.0.1", "2002:7f00:1::", "::127.0.0.1", "::ffff:10.0.0.1"])
def test_a_name_that_resolves_to_one_at_delivery_is_not_called(team, api_as, settings, monkeypatch, address):
    settings.CTX_WEBHOOK_ALLOW_PRIVATE = False
    answers = iter(["2606:4700:4700::1111", address])

    def lookup(host, port, *args, **kwargs):
        return [(10, 1, 6, "", (next(answers), port, 0, 0))]

    connected: list[tuple[str, int]] = []

    def connect(where, timeout=None, *args, **kwargs):
        connected.append(where)
        raise ConnectionRefusedError("not in a test")

    monkeypatch.setattr(webhook_urls.socket, "getaddrinfo", lookup)
    monkeypatch.setattr(webhook_http.socket, "create_connection", connect)
    api = api_as(team.alice)
    hook = add(api, team.project, "http://hooks.example.com/ctxweb")
    assert hook.status_code == 201, hook.content
    delivery = api.post(f"/api/v1/webhooks/{hook.json()['id']}/test/").json()["id"]
    assert connected == []
    attempt = WebhookAttempt.objects.get(delivery_id=delivery)
    assert attempt.status_code is None and "private or reserved" in attempt.error


@pytest.mark.parametrize(
    "url", ["http://a..b/", "http://.example.com/", "https://x..y:443/p", f"http://{'a' * 64}.example.com/"]
)
def test_a_host_with_an_empty_or_overlong_label_is_refused_not_a_server_error(team, api_as, settings, url):
    settings.CTX_WEBHOOK_ALLOW_PRIVATE = False
    response = add(api_as(team.alice), team.project, url)
    assert response.status_code == 400 and response.json()["code"] == "invalid_url", response.content


@pytest.mark.parametrize("url", ["http://localhost./hook", "http://127.0.0.1./hook", "http://x.localhost./hook"])
def test_a_trailing_dot_does_not_hide_a_local_name(team, api_as, settings, url):
    settings.CTX_WEBHOOK_ALLOW_PRIVATE = False
    assert add(api_as(team.alice), team.project, url).status_code == 400
