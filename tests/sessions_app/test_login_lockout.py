"""Brute force against the sign-in pages: after AXES_FAILURE_LIMIT wrong passwords for one username
from one address, even the right password is refused (429, a page saying so) until the cool-off has
passed. Other addresses, other usernames and API keys are not affected."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory
from django.utils import timezone

from ctxweb.lockout import client_ip

pytestmark = pytest.mark.django_db

LIMIT = settings.AXES_FAILURE_LIMIT
COOL_OFF = settings.AXES_COOLOFF_TIME
USER_LOGIN = "/accounts/login/"
ADMIN_LOGIN = "/admin/login/"


@pytest.fixture
def root(db):
    return get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123")


def sign_in(client: Client, path: str, username: str, password: str, **extra):
    return client.post(path, {"username": username, "password": password}, **extra)


def signed_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def fail(client: Client, path: str, username: str, times: int, **extra) -> None:
    """Wrong passwords: the form again with its error, and the lockout page from the LIMIT-th on."""
    for i in range(times):
        response = sign_in(client, path, username, f"wrong-{i}", **extra)
        assert response.status_code == (200 if i < LIMIT - 1 else 429), (i, response.status_code)


@pytest.mark.parametrize(
    ("path", "who", "password", "lands_on"),
    [
        (USER_LOGIN, "alice", "alice-pass-123", "/projects/"),
        (f"{ADMIN_LOGIN}?next=/admin/", "root", "root-pass-123", "/admin/"),
    ],
)
def test_the_right_password_is_refused_after_too_many_wrong_ones_until_the_cool_off(
    client, team, root, time_machine, path, who, password, lands_on
):
    time_machine.move_to(timezone.now(), tick=False)
    fail(client, path, who, LIMIT)
    locked = sign_in(client, path, who, password)
    assert locked.status_code == 429
    body = locked.content.decode()
    assert "Too many sign-in attempts" in body and f"After {LIMIT} failed attempts" in body
    assert not signed_in(client)

    time_machine.shift(COOL_OFF - timedelta(seconds=1))
    assert sign_in(client, path, who, password).status_code == 429  # still within it
    time_machine.shift(timedelta(minutes=2))  # past the first lock, but that refused try started it again
    assert sign_in(client, path, who, password).status_code == 429
    time_machine.shift(COOL_OFF + timedelta(seconds=1))
    opened = sign_in(client, path, who, password)
    assert opened.status_code == 302 and opened["Location"] == lands_on
    assert signed_in(client)


def test_one_failure_short_of_the_limit_still_signs_in_and_starts_afresh(client, team):
    fail(client, USER_LOGIN, "alice", LIMIT - 1)
    assert sign_in(client, USER_LOGIN, "alice", "alice-pass-123").status_code == 302
    client.logout()
    fail(client, USER_LOGIN, "alice", LIMIT - 1)  # a success cleared the earlier failures
    assert sign_in(client, USER_LOGIN, "alice", "alice-pass-123").status_code == 302


def test_the_lock_holds_one_username_from_one_address_only(client, team, api_as):
    fail(client, USER_LOGIN, "alice", LIMIT)
    assert sign_in(client, USER_LOGIN, "alice", "alice-pass-123").status_code == 429
    elsewhere = Client(REMOTE_ADDR="192.0.2.7")
    assert sign_in(elsewhere, USER_LOGIN, "alice", "alice-pass-123").status_code == 302
    assert sign_in(Client(), USER_LOGIN, "bob", "bob-pass-123").status_code == 302
    # API keys never go through the sign-in pages: Alice's agents keep working.
    assert api_as(team.alice).get("/api/v1/projects/").status_code == 200


def test_behind_the_proxy_the_address_is_the_one_the_proxy_added(client, team, settings):
    settings.CTX_BEHIND_PROXY = True
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.1", HTTP_X_FORWARDED_FOR="203.0.113.5, 198.51.100.9")
    assert client_ip(request) == "198.51.100.9"
    # A client that forges the left-hand entries on every try is still one address.
    for i in range(LIMIT):
        forged = f"203.0.113.{i}, 198.51.100.9"
        answer = sign_in(client, USER_LOGIN, "alice", f"wrong-{i}", HTTP_X_FORWARDED_FOR=forged)
        assert answer.status_code == (200 if i < LIMIT - 1 else 429)
    refused = sign_in(client, USER_LOGIN, "alice", "alice-pass-123", HTTP_X_FORWARDED_FOR="1.1.1.1, 198.51.100.9")
    assert refused.status_code == 429
    other = sign_in(client, USER_LOGIN, "alice", "alice-pass-123", HTTP_X_FORWARDED_FOR="198.51.100.10")
    assert other.status_code == 302
    settings.CTX_BEHIND_PROXY = False
    assert client_ip(request) == "10.0.0.1"  # without the proxy the header is the client's own words
