"""What the browser tests share: people, a session worth compacting, and reading the pages."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compaction.status import Status
from sessions_app.selectors import usage
from sessions_app.services import agent_sessions, ingest, keys, projects
from tests.conftest import ROOT

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
TIMEOUT_MS = 15_000
SEGMENTS = ("system_prompt", "tool_definitions", "messages", "summary", "reserved_output", "free")


def shot(page: Any, name: str, *, full_page: bool = False, max_height: int = 4000, **kwargs: Any) -> Path:
    """A screenshot of the page as it is now, kept as a test artifact under test-artifacts/.
    ``full_page``: the whole page, down to ``max_height`` CSS pixels (a long timeline is cut)."""
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    if full_page and "clip" not in kwargs:
        width, height = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
        kwargs["clip"] = {"x": 0, "y": 0, "width": width, "height": min(height, max_height)}
    page.screenshot(path=str(path), full_page=full_page, **kwargs)
    return path


# ----------------------------------------------------------------------------- people and data


@dataclass
class Person:
    user: Any
    password: str
    key: str


def person(username: str) -> Person:
    from django.contrib.auth import get_user_model

    password = f"{username}-pass-123"
    user = get_user_model().objects.create_user(username=username, password=password)
    _, key = keys.apikey_create(user=user, name="browser test")
    return Person(user=user, password=password, key=key)


@dataclass
class Crew:
    """Alice administers the project, Bob is a member, Carol a viewer, Mallory is outside it."""

    alice: Person
    bob: Person
    carol: Person
    mallory: Person
    project: Any


def crew_create() -> Crew:
    from sessions_app.models import Role

    alice, bob, carol, mallory = (person(n) for n in ("alice", "bob", "carol", "mallory"))
    project = projects.project_create(user=alice.user, name="Alpha", description="Agents at work")
    projects.membership_set(project=project, user=bob.user, role=Role.MEMBER)
    projects.membership_set(project=project, user=carol.user, role=Role.VIEWER)
    projects.project_create(user=mallory.user, name="Mallory's own")
    return Crew(alice, bob, carol, mallory, project)


def busy_session(owner: Any, project: Any, *, name: str = "Busy agent", rounds: int = 24) -> Any:
    """Past the compact threshold of a 30k window, auto-compaction off (the tests drive it)."""
    from tests.sessions_app.compaction_helpers import agent_rounds, append

    session = agent_sessions.session_create(
        user=owner,
        project=project,
        name=name,
        model="claude-sonnet-4-5",
        context_window=30_000,
        auto_compact=False,
        system_prompt="You are a careful coding agent. Explain decisions briefly.",
        tools=[{"name": "Bash", "description": "Run a shell command.", "input_schema": {"type": "object"}}],
    )
    append(session, agent_rounds(rounds))
    return session


def chat_session(owner: Any, project: Any, *, name: str = "Quick chat") -> Any:
    from compaction.messages import normalize_message

    session = agent_sessions.session_create(user=owner, project=project, name=name, model="claude-haiku-4-5")
    turns = [
        {"role": "user", "content": "What is a context window?"},
        {"role": "assistant", "content": "The number of tokens a model can read at once."},
    ]
    ingest.message_append(session=session, messages=[normalize_message(t) for t in turns])
    session.refresh_from_db()
    return session


def status_of(session: Any) -> Status:
    session.refresh_from_db()
    return usage.session_status(session)


# ----------------------------------------------------------------------------- reading pages


def bar_of(locator: Any) -> tuple[float, str]:
    """(aria-valuenow, data-level) of a usage bar."""
    return float(locator.get_attribute("aria-valuenow")), locator.get_attribute("data-level")


def live_bar(page: Any) -> tuple[float, str]:
    return bar_of(page.locator("#live [role=progressbar]"))


def legend(page: Any) -> dict[str, int]:
    """The token figure of each segment in the legend under the stacked bar."""
    return {
        key: int(page.locator(f"#live .legend li:has(.seg-{key}) strong").inner_text().replace(",", ""))
        for key in SEGMENTS
    }


def figures(status: Mapping[str, Any]) -> dict[str, int]:
    return {key: status[key] for key in SEGMENTS}


def csrf_token(page: Any) -> str:
    """The token the page sends with its htmx requests (base.html puts it in ``hx-headers``)."""
    headers = page.locator("body").get_attribute("hx-headers") or ""
    match = re.search(r'"X-CSRFToken":\s*"([^"]+)"', headers)
    assert match, f"no CSRF token in {headers!r}"
    return match.group(1)


def post_form(page: Any, path: str, form: dict[str, str] | None = None) -> Any:
    """A POST with the page's cookies and a valid CSRF token, as a crafted request would send it:
    only the server's permission check can refuse it."""
    return page.request.post(path, form=form or {}, headers={"X-CSRFToken": csrf_token(page)}, max_redirects=0)


def horizontal_overflow(page: Any) -> int:
    """How many CSS pixels the document is wider than the viewport."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def demo_signed_in(open_as: Any, live_server: Any, viewport: dict[str, int] | None = None) -> tuple[Any, Any]:
    """The demo project loaded, and a page signed in through the sign-in form as its user."""
    from sessions_app.services.demo import demo_load

    demo = demo_load()
    page = open_as(None, viewport=viewport) if viewport else open_as(None)
    page.goto("/accounts/login/")
    page.fill("#id_username", demo.username)
    page.fill("#id_password", demo.password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(f"{live_server.url}/projects/")
    return page, demo
