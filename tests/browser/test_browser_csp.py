"""The Content-Security-Policy breaks nothing: Chromium reports no violation (and no script error)
while a person signs in, switches project, opens a session whose page polls live and reloads its
timeline, the settings, Django admin and the API docs."""

from __future__ import annotations

from typing import Any

import pytest

from sessions_app.services import ingest
from tests.browser.helpers import chat_session
from tests.sessions_app.test_csp import periodic_task

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Forwards each violation to the console, where Chromium also writes its own "Refused to …" lines.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (e) => {
  const where = `${e.sourceFile}:${e.lineNumber}`;
  console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI || "inline"} at ${where}`);
});
"""


def watched(page: Any) -> list[str]:
    """What the page reports as it goes: CSP violations and uncaught script errors."""
    problems: list[str] = []
    page.add_init_script(REPORT_VIOLATIONS)

    def on_console(message: Any) -> None:
        if "Content Security Policy" in message.text or "CSP violation" in message.text:
            problems.append(f"{page.url}: {message.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: problems.append(f"{page.url}: script error {error}"))
    return problems


def test_no_page_violates_the_policy(open_as, live_server, crew):
    from django.contrib.auth import get_user_model

    from sessions_app.models import Message

    session = chat_session(crew.alice.user, crew.project)
    page = open_as(None)
    problems = watched(page)

    response = page.goto("/accounts/login/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.fill("#id_username", "alice")
    page.fill("#id_password", crew.alice.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live_server.url}/projects/")

    # The header's switcher (a script of ours, no inline handler) still jumps to the project.
    page.select_option("#switch-project", str(crew.project.pk))
    page.wait_for_url(f"{live_server.url}/projects/{crew.project.pk}/")
    assert page.locator("table.sessions tbody tr").count() == 1

    page.goto(f"/sessions/{session.pk}/")
    page.wait_for_function("window.htmx !== undefined")
    assert page.evaluate("document.querySelectorAll('style').length") == 0, "htmx injected its indicator <style>"
    # A message arrives: the live poll answers, then the timeline reloads itself, in place.
    from compaction.messages import normalize_message

    ingest.message_append(session=session, messages=[normalize_message({"role": "user", "content": "CSP ok?"})])
    seq = Message.objects.filter(session=session).order_by("-seq").values_list("seq", flat=True).first()
    page.locator(f"#timeline #msg-{seq}").wait_for(timeout=10_000)
    width = page.evaluate("getComputedStyle(document.querySelector('#live .seg-messages')).width")
    assert width != "0px" and width != "auto", "the bar's widths (style attributes) apply"

    page.goto(f"/projects/{crew.project.pk}/settings/")
    assert page.locator("h1").inner_text() == "Settings"
    page.goto(f"/projects/{crew.project.pk}/settings/webhooks/")
    assert page.locator("h1").inner_text() == "Webhooks"
    page.goto("/keys/")
    page.goto(f"/messages/{Message.objects.filter(session=session).first().pk}/")

    page.goto("/api/docs/")
    page.locator(".swagger-ui .info .title").wait_for()
    assert "ctxweb API" in page.locator(".swagger-ui .info .title").inner_text()
    page.locator(".swagger-ui .opblock").first.wait_for()

    root = get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123")
    admin = open_as(None)
    problems += watched(admin)
    admin.goto("/admin/login/?next=/admin/")
    admin.fill("#id_username", "root")
    admin.fill("#id_password", "root-pass-123")
    admin.locator("input[type=submit]").click()
    admin.wait_for_url(f"{live_server.url}/admin/")
    task = periodic_task()
    for path in (
        "/admin/sessions_app/project/",
        f"/admin/sessions_app/project/{crew.project.pk}/change/",
        "/admin/sessions_app/project/add/",
        "/admin/sessions_app/webhook/add/",
        "/admin/sessions_app/modelprofile/",
        f"/admin/django_celery_beat/periodictask/{task.pk}/change/",
        "/admin/auth/user/",
    ):
        assert admin.goto(path).status == 200, path
        admin.wait_for_load_state("networkidle")
    assert root.is_superuser

    assert problems == []
