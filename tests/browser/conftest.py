"""Browser tests: Debian's Chromium, headless, driven by Playwright against pytest-django's live server.

One browser for all of tests/browser; each test opens its own contexts (cookie jars). Screenshots of
the main pages land in ``test-artifacts/``. Without /usr/bin/chromium these tests skip (and fail
under CTX_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tests.browser.helpers import CHROMIUM, DESKTOP, LAUNCH_ARGS, TIMEOUT_MS, Crew, crew_create
from tests.conftest import need

ASYNC_UNSAFE = "DJANGO_ALLOW_ASYNC_UNSAFE"


@pytest.fixture(scope="package")
def browser(django_db_setup) -> Iterator[Any]:
    """Launched once for this package, closed after its last test.

    Playwright's sync API leaves its asyncio loop marked as running on this thread between calls,
    and Django then refuses ORM calls from the test body (and pytest-django's flush between tests)
    as coming from an "async context". They are plain synchronous code here, so the check is off
    while the browser lives, and back on for the tests that follow. (Package scope, not session,
    for that reason; the test database is set up first and outlives it.)"""
    need(CHROMIUM.exists(), f"Chromium is not at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    previous = os.environ.get(ASYNC_UNSAFE)
    os.environ[ASYNC_UNSAFE] = "true"
    try:
        with sync_playwright() as playwright:
            instance = playwright.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
            yield instance
            instance.close()
    finally:
        if previous is None:
            os.environ.pop(ASYNC_UNSAFE, None)
        else:
            os.environ[ASYNC_UNSAFE] = previous


@pytest.fixture
def crew(transactional_db) -> Crew:
    return crew_create()


@pytest.fixture
def open_as(browser, live_server):
    """``open_as(user)``: a new page in a browser context signed in as ``user`` (a server-side
    session's cookie; the sign-in form itself is exercised in test_sign_in...). ``None``: anonymous."""
    contexts: list[Any] = []

    def make(user: Any = None, *, viewport: dict[str, int] | None = None) -> Any:
        from django.test import Client

        context = browser.new_context(viewport=viewport or DESKTOP, base_url=live_server.url)
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        if user is not None:
            client = Client()
            client.force_login(user)
            cookie = client.cookies["sessionid"]
            context.add_cookies([{"name": "sessionid", "value": cookie.value, "url": live_server.url}])
        return context.new_page()

    yield make
    for context in contexts:
        context.close()
