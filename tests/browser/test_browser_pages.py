"""The browser pages in a real Chromium: sign in, projects, a project's bars, the session page's
numbers, dry run, compaction, revert, handoff downloads, what a viewer and an outsider get, a phone.

Tasks run in-process here (the embedded mode), so a compaction is done when its POST answers; the
live following of a worker's compaction is in test_browser_live.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from compaction.status import Status
from sessions_app import tasks
from sessions_app.models import Compaction, HandoffDocument
from sessions_app.services import compaction_runs
from tests.browser.helpers import (
    ARTIFACTS,
    PHONE,
    bar_of,
    busy_session,
    chat_session,
    demo_signed_in,
    figures,
    horizontal_overflow,
    legend,
    live_bar,
    post_form,
    shot,
    status_of,
)
from tests.conftest import ROOT

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

DOCS_SCREENSHOT = ROOT / "docs" / "img" / "session.png"


@pytest.fixture
def sessions(crew):
    """Three sessions of Alice's project at different levels."""
    busy = busy_session(crew.alice.user, crew.project)
    half = busy_session(crew.bob.user, crew.project, name="Half way", rounds=12)
    chat = chat_session(crew.alice.user, crew.project)
    return {"busy": busy, "half": half, "chat": chat}


def assert_live_numbers(page, session) -> Status:
    """The stacked bar and its legend show exactly what STATUS says."""
    status = status_of(session)
    assert live_bar(page) == (status["usage_percent"], status["level"])
    assert legend(page) == figures(status)
    assert page.locator("#live .status-line strong").first.inner_text() == str(status["used"])
    return status


def test_sign_in_projects_and_a_project_with_its_bars(open_as, live_server, crew, sessions):
    page = open_as(None)
    page.goto("/")
    assert page.url.startswith(f"{live_server.url}/accounts/login/")
    shot(page, "login")

    page.fill("#id_username", "alice")
    page.fill("#id_password", "wrong password")
    page.get_by_role("button", name="Sign in").click()
    assert "enter a correct username and password" in page.get_by_role("alert").inner_text()

    page.fill("#id_username", "alice")
    page.fill("#id_password", crew.alice.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live_server.url}/projects/")
    assert page.locator("h1").inner_text() == "Projects"
    assert page.get_by_role("link", name="Alpha").is_visible()
    assert page.get_by_role("link", name="Mallory's own").count() == 0
    shot(page, "projects")

    page.get_by_role("link", name="Alpha").click()
    page.wait_for_url(f"{live_server.url}/projects/{crew.project.pk}/")
    rows = page.locator("table.sessions tbody tr")
    assert rows.count() == 3
    levels = set()
    for session in sessions.values():
        status = status_of(session)
        row = rows.filter(has=page.get_by_role("link", name=session.name, exact=True))
        assert row.count() == 1, session.name
        assert bar_of(row.get_by_role("progressbar")) == (status["usage_percent"], status["level"]), session.name
        assert f"{status['usage_percent']}%" in row.locator(".usage-label").inner_text()
        levels.add(status["level"])
    assert len(levels) == 3, f"the fixture's sessions should sit at three levels, not {levels}"
    shot(page, "project", full_page=True)

    page.get_by_role("link", name="Settings").click()
    page.wait_for_url(f"{live_server.url}/projects/{crew.project.pk}/settings/")
    members = page.locator("#members tbody tr td:first-child").all_inner_texts()
    assert sorted(members) == ["alice", "bob", "carol"]
    shot(page, "settings", full_page=True)


def test_session_page_numbers_dry_run_compact_revert_and_handoff(open_as, live_server, crew, sessions):
    busy = sessions["busy"]
    page = open_as(crew.bob.user)  # a member: may compact, revert and hand off
    page.goto(f"/sessions/{busy.pk}/")
    original = assert_live_numbers(page, busy)
    assert original["level"] in ("summarize", "handoff")
    page.wait_for_function("window.htmx !== undefined")  # the live parts need htmx

    # Dry run: htmx fills #preview, the page stays, nothing is written.
    page.select_option("#id_level", "compact")
    page.get_by_role("button", name="Preview (dry run)").click()
    preview = page.locator("#preview #preview-result")
    preview.wait_for()
    assert page.url == f"{live_server.url}/sessions/{busy.pk}/"
    assert "Nothing was written" in preview.inner_text()
    before, after = (int(n) for n in preview.locator("p strong").all_inner_texts())
    assert before == original["used"] and after < before
    assert int(preview.locator(".saved").inner_text()) == before - after
    assert not Compaction.objects.filter(session=busy).exists()
    assert status_of(busy) == original

    # Run it: embedded mode, so the page it comes back to shows it done.
    page.get_by_role("button", name="Run compaction").click()
    page.wait_for_url(re.compile(rf"/sessions/{busy.pk}/#compactions$"))
    record = Compaction.objects.get(session=busy)
    assert record.status == "succeeded", record.error
    assert f"Compaction {record.pk} (compact) queued" in page.locator(".flash").inner_text()
    row = page.locator(f"#compaction-{record.pk}")
    assert row.get_attribute("data-status") == "succeeded"
    assert f"{record.tokens_before} → {record.tokens_after} (saved {record.saved_tokens})" in row.inner_text()
    assert record.saved_tokens > 0 and record.tokens_after == after
    compacted = assert_live_numbers(page, busy)
    assert compacted["used"] == record.tokens_after < original["used"]
    assert page.locator("#timeline .badge.state-compacted").count() > 0
    shot(page, "session", full_page=True)

    # Revert: the link, the confirm page, the button; every number is back.
    page.get_by_role("link", name="Revert…").click()
    page.wait_for_url(f"{live_server.url}/compactions/{record.pk}/revert/")
    assert page.locator("h1").inner_text() == f"Revert compaction {record.pk}"
    assert "byte for byte" in page.locator(".card").inner_text()
    shot(page, "revert-confirm")
    page.get_by_role("button", name=f"Revert compaction {record.pk}").click()
    page.wait_for_url(re.compile(rf"/sessions/{busy.pk}/#compactions$"))
    assert "reverted" in page.locator(".flash").inner_text()
    record.refresh_from_db()
    assert page.locator(f"#compaction-{record.pk}").get_attribute("data-status") == record.status == "reverted"
    restored = assert_live_numbers(page, busy)
    assert figures(restored) == figures(original)
    assert restored["usage_percent"] == original["usage_percent"]
    assert page.get_by_role("link", name="Revert…").count() == 0

    # Handoff document, then its downloads with the page's own cookies.
    page.get_by_role("button", name="Write handoff document").click()
    page.wait_for_url(re.compile(rf"/sessions/{busy.pk}/#handoffs$"))
    document = HandoffDocument.objects.get(session=busy)
    assert f"Handoff {document.pk} written" in page.locator(".flash").inner_text()
    handoffs = page.locator("#handoffs")
    handoffs.locator("summary").first.click()
    expected = {
        "txt": ("text/plain", lambda body: "CURRENT TASK" in body and body == document.text),
        "md": ("text/markdown", lambda body: body == document.markdown and body.lstrip().startswith("#")),
        "json": ("application/json", lambda body: json.loads(body) == document.data),
    }
    for fmt, (content_type, check) in expected.items():
        link = handoffs.get_by_role("link", name=fmt, exact=True)
        assert link.is_visible()
        response = page.request.get(link.get_attribute("href"))
        assert response.status == 200, fmt
        assert response.headers["content-type"].startswith(content_type), response.headers
        assert f"handoff-{busy.pk}-{document.pk}.{fmt}" in response.headers["content-disposition"]
        assert check(response.text()), fmt


def test_viewer_sees_no_write_controls_and_an_outsider_gets_404(open_as, crew, sessions):
    busy = sessions["busy"]
    record = compaction_runs.compaction_request(session=busy, level="compact", user=crew.alice.user)
    tasks.compaction_send(record.pk)
    record.refresh_from_db()
    assert record.status == "succeeded"

    writer = open_as(crew.alice.user)
    writer.goto(f"/sessions/{busy.pk}/")
    assert writer.locator("#compaction-form").count() == 1
    assert writer.get_by_role("link", name="Revert…").count() == 1  # so a viewer's missing one means something

    page = open_as(crew.carol.user)
    response = page.goto(f"/sessions/{busy.pk}/")
    assert response.status == 200
    assert_live_numbers(page, busy)
    assert page.locator("#compaction-form").count() == 0
    assert page.locator("#handoff-form").count() == 0
    assert page.get_by_role("button", name="Run compaction").count() == 0
    assert page.get_by_role("link", name="Revert…").count() == 0
    assert "revertible until" in page.locator(f"#compaction-{record.pk}").inner_text()

    # Crafted requests with her cookies and a valid CSRF token are refused all the same.
    for path, form in [
        (f"/sessions/{busy.pk}/compactions/", {"level": "compact"}),
        (f"/sessions/{busy.pk}/compactions/preview/", {"level": "compact"}),
        (f"/sessions/{busy.pk}/handoff/", {}),
        (f"/compactions/{record.pk}/revert/", {}),
    ]:
        assert post_form(page, path, form).status == 403, path
    assert page.goto(f"/compactions/{record.pk}/revert/").status == 403
    record.refresh_from_db()
    assert record.status == "succeeded"
    assert Compaction.objects.filter(session=busy).count() == 1
    assert not HandoffDocument.objects.filter(session=busy).exists()

    outsider = open_as(crew.mallory.user)
    assert outsider.goto(f"/sessions/{busy.pk}/").status == 404
    assert outsider.goto(f"/projects/{crew.project.pk}/").status == 404
    assert outsider.goto(f"/sessions/{busy.pk}/live/").status == 404
    outsider.goto("/projects/")  # a page of hers, for a CSRF token
    assert post_form(outsider, f"/sessions/{busy.pk}/compactions/", {"level": "compact"}).status == 404


def test_session_and_project_pages_fit_a_phone(open_as, crew, sessions):
    busy = sessions["busy"]
    record = compaction_runs.compaction_request(session=busy, level="compact", user=crew.alice.user)
    tasks.compaction_send(record.pk)
    page = open_as(crew.alice.user, viewport=PHONE)
    page.goto(f"/sessions/{busy.pk}/")
    assert page.locator("#compactions table.compactions").is_visible()
    assert_live_numbers(page, busy)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"] + 1
    assert horizontal_overflow(page) <= 1
    shot(page, "session-390", full_page=True)
    page.goto(f"/projects/{crew.project.pk}/")
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"] + 1


@pytest.mark.django_db(transaction=True, reset_sequences=True)  # small ids in the picture
def test_docs_screenshot_of_the_session_page(open_as, live_server):
    """The README's picture, from the demo project after two compactions: saved as a test artifact,
    and written to docs/img/session.png when CTX_UPDATE_SCREENSHOTS=1."""
    page, demo = demo_signed_in(open_as, live_server)
    session = next(s for s in demo.sessions if s.name == "Long refactor")
    page.goto(f"/sessions/{session.pk}/")
    for level in ("compact", "summarize"):
        page.select_option("#id_level", level)
        page.get_by_role("button", name="Run compaction").click()
        page.wait_for_url(re.compile(rf"/sessions/{session.pk}/#compactions$"))
    assert page.locator("#compactions tr.compaction[data-status=succeeded]").count() == 2
    assert page.locator("#checkpoints details.checkpoint").count() == 1
    assert_live_numbers(page, session)
    page.goto(f"/sessions/{session.pk}/")  # without the flash message
    # Down to the checkpoint's first sections: the bar, the compactions, the forms, the checkpoint.
    bottom = page.evaluate(
        "Math.ceil(document.querySelector('#checkpoints dl.sections dd:nth-of-type(3)')"
        ".getBoundingClientRect().bottom + window.scrollY + 4)"
    )
    path = shot(page, "session-docs", full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": bottom})
    assert path.stat().st_size < 500_000, path.stat().st_size  # with the requests' table and charts
    if os.environ.get("CTX_UPDATE_SCREENSHOTS") == "1":
        DOCS_SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_SCREENSHOT)
    assert ARTIFACTS.joinpath("session-docs.png").exists()
