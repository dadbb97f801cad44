"""Whatever is accepted reads back.

Hypothesis throws hostile JSON (``tests/hostile_json.py``: lone surrogates, NUL, over-long strings,
huge and negative numbers, non-finite floats, dates at the ends of the calendar and offsets no
database holds, nesting hundreds of levels deep, wrong types, and entirely arbitrary JSON) at every
write endpoint and import format, authenticated as a project member (Bob). Every answer is a 2xx or
a 4xx with ``detail`` and ``code``; a 4xx writes nothing (the row count of every table of the app
is the same before and after); and after every 2xx the session it touched still reads: its detail,
messages (all states), context in both formats, status and compactions over REST; its page (usage
bar, live panel, timeline) and its project's page; the admin's session list and change form and its
message list and a message's change form; then, with a few old tool outputs appended so there is
something to prune, a compaction dry run, a compaction (which must not fail), the reads again, the
original of a message it changed, its revert, and the context once more.

The ``test_one_field_of_*`` tests add a systematic sweep: one valid body per endpoint with one value
a column can't hold (or only just can) in one field of it.

A server error fails the example with the server's own exception (so Hypothesis tells distinct bugs
apart) and notes naming the request, the requests before it and the rows it left behind.

Knobs: the Hypothesis profile (examples per endpoint: ``HYPOTHESIS_PROFILE=deep`` digs deep),
``CTX_READBACK_SHRINK_SECONDS`` (how long to shrink a failure, default 10) and
``CTX_READBACK_SURVEY=FILE``: record every failing example as a JSON line in FILE and go on, so one
run lists every distinct failure rather than the first of each endpoint.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import os
import traceback
import types
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.apps import apps
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from sessions_app.services import agent_sessions
from tests import hostile_json as hj
from tests.conftest import Team
from tests.hypothesis_budget import SERVER
from tests.sessions_app.compaction_helpers import agent_rounds

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Examples per endpoint (the profile's budget for HTTP tests); the import runs twice as many (most
# uploads are refused, cheaply), and the two that store nothing (count_tokens, the list filters) four
# times as many.
EXAMPLES = SERVER.max_examples
# Shrinking replays whole request sequences: it stops after this many seconds per test (Hypothesis'
# own limit is 300) and reports the smallest failing example found by then.
SHRINK_SECONDS = float(os.environ.get("CTX_READBACK_SHRINK_SECONDS", "10"))
# A file name: every failure is appended there as a JSON line and the example passes, so one run
# surveys every distinct failure instead of stopping at the first of each test.
SURVEY = os.environ.get("CTX_READBACK_SURVEY", "")
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    # No explain phase: it replays each failure many more times to say which lines ran.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one project and its people per test; each example makes its own session
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ],
)
API = "/api/v1"
NOBODY = object()
EXTERNAL_IDS = itertools.count(1)
PADDING_SEEDS = itertools.count(1000)


class Ref:
    """Stands for an object of the running test (its id is known only then)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Ref({self.name!r})"


PROJECT_REFS = hj.sometimes(
    st.just(Ref("project")),
    st.one_of(
        st.sampled_from([Ref("project_str"), Ref("project_name"), Ref("other_project"), Ref("session")]),
        hj.HOSTILE,
    ),
    20,
)
SESSION_REFS = hj.sometimes(
    st.just(None), st.one_of(st.just(Ref("session")), st.just(Ref("other_session")), hj.HOSTILE)
)


def surveyed(test: Any) -> Any:
    """With ``CTX_READBACK_SURVEY`` set, record a failing example (``SURVEY``) instead of failing."""
    if not SURVEY:
        return test

    @functools.wraps(test)
    def run(world: World, **kwargs: Any) -> None:
        try:
            test(world, **kwargs)
        except Exception as exc:
            frames = traceback.extract_tb(exc.__traceback__)
            site = next((f for f in reversed(frames) if "/tests/" not in f.filename), frames[-1])
            record = {
                "test": test.__name__,
                "error": f"{type(exc).__name__}: {str(exc)[:400]}",
                "at": f"{site.filename}:{site.lineno} in {site.name}",
                "request": world.log[-1][:2000] if world.log else "",
                "tail": traceback.format_exception(exc)[-1][:300] if not isinstance(exc, AssertionError) else "",
            }
            with open(SURVEY, "a", encoding="utf-8") as out:
                out.write(json.dumps(record, ensure_ascii=False) + "\n")

    return run


def _trimmed(exc: BaseException) -> BaseException:
    """A very deep traceback (a RecursionError) cut to its first 25 and last 10 frames."""
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    if len(frames) <= 60:
        return exc
    chain = None
    for old in reversed(frames[:25] + frames[-10:]):
        chain = types.TracebackType(chain, old.tb_frame, old.tb_lasti, old.tb_lineno)
    exc.add_note(f"({len(frames) - 35} frames of the traceback left out)")
    return exc.with_traceback(chain)


def _describe(body: Any) -> str:
    """The body as sent: JSON text, or a multipart form with its file's name and bytes."""
    if body is NOBODY:
        return ""
    if isinstance(body, bytes):
        text = body.decode("utf-8", "replace")
    elif isinstance(body, dict) and any(isinstance(v, SimpleUploadedFile) for v in body.values()):
        parts = []
        for name, value in body.items():
            if isinstance(value, SimpleUploadedFile):
                content = value.read()
                value.seek(0)
                assert value.name is not None  # an uploaded file is named
                value = f"<file {value.name!r} ({len(value.name)} characters), {len(content):,} bytes: {content!r}>"
            else:
                value = repr(value)
            parts.append(f"{name}={value}")
        text = "multipart: " + ", ".join(parts)
    else:
        try:
            text = hj.dumps(body)
        except TypeError:
            text = repr(body)
    return text if len(text) <= 2000 else f"{text[:2000]}… ({len(text):,} characters)"


def table_counts() -> dict[str, int]:
    """Rows of every table of the app (and of users): what a refused request must leave alone."""
    models = [*apps.get_app_config("sessions_app").get_models(), apps.get_model("auth", "User")]
    return {m._meta.label: m._default_manager.count() for m in models}


@dataclass
class World:
    """The test's project and people, and clients for the API (Bob, a member), the pages (Bob) and
    the admin (a superuser)."""

    team: Team
    api: Client
    html: Client
    admin: Client
    other_project: int
    other_session: int
    current_session: int | None = None
    log: list[str] = field(default_factory=list)

    @property
    def project(self) -> Any:
        return self.team.project

    # ---------------------------------------------------------------- requests

    def resolve(self, value: Any) -> Any:
        """``value`` with every ``Ref`` at its top level replaced by the real id (or name)."""
        if isinstance(value, dict):
            return {k: self.resolve(v) for k, v in value.items()}
        if not isinstance(value, Ref):
            return value
        return {
            "project": self.project.pk,
            "project_str": str(self.project.pk),
            "project_name": self.project.name,
            "other_project": self.other_project,
            "session": self.current_session,
            "other_session": self.other_session,
        }[value.name]

    def send(self, client: Client, method: str, path: str, body: Any = NOBODY, **kwargs: Any) -> Any:
        """One request; a server exception propagates as itself, with a note saying which request."""
        headers = {"HTTP_AUTHORIZATION": f"Bearer {self.team.bob.key}"} if client is self.api else {}
        described = _describe(body)  # before sending: an uploaded file is read by then
        self.log.append(f"{method.upper()} {path} {described}")
        try:
            if body is NOBODY:
                return getattr(client, method)(path, **kwargs, **headers)
            if isinstance(body, bytes):
                return getattr(client, method)(path, data=body, content_type="application/json", **headers)
            return getattr(client, method)(path, data=body, **kwargs, **headers)  # multipart
        except Exception as exc:
            exc.add_note(f"while answering {method.upper()} {path}\nbody: {described}")
            exc.add_note("requests of this example:\n" + "\n".join(self.log[-12:]))
            raise _trimmed(exc)  # noqa: B904 - the server's own exception, as the test client raised it

    def write(self, method: str, path: str, body: Any, *, ascii_only: bool = True, multipart: bool = False) -> Any:
        """A write: a 2xx, or a 4xx with detail and code that changed no table. ``body`` is sent as
        JSON text (``hj.dumps``), or as a multipart form when ``multipart``."""
        payload = body if multipart else hj.encode(self.resolve(body), ascii_only=ascii_only)
        before = table_counts()
        try:
            response = self.send(self.api, method, path, payload)
        except Exception as exc:
            after = table_counts()
            changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
            exc.add_note(f"rows the failed request left behind (before, after): {changed or 'none'}")
            raise
        where = f"{method.upper()} {path} {_describe(payload)}"
        if 200 <= response.status_code < 300:
            return response
        error = error_body(response, where)
        after = table_counts()
        changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
        assert not changed, f"{where} answered {response.status_code} {error} but wrote rows (before, after): {changed}"
        return response

    def read(self, client: Client, path: str, *, expect: tuple[int, ...] = (200,)) -> Any:
        response = self.send(client, "get", path)
        assert response.status_code in expect, (
            f"GET {path} answered {response.status_code} after the write was accepted: "
            f"{response.content[:600]!r}\nrequests of this example:\n" + "\n".join(self.log[-12:])
        )
        return response

    # ---------------------------------------------------------------- read-back

    def read_back(self, session_id: int, *, compact: bool = True) -> None:
        """Everything that shows a session, then (``compact``) a dry run, a compaction and its revert."""
        self.reads(session_id)
        if compact:
            self.compact_and_revert(session_id)

    def reads(self, session_id: int, *, full: bool = True) -> None:
        """What shows the session: its context in both formats, messages and page (which holds the
        usage bar, the live panel and the timeline), and (``full``) its status, detail, active
        messages and compactions over REST, its project's page and the admin's lists and forms."""
        s = f"{API}/sessions/{session_id}"
        for fmt in ("anthropic", "openai"):
            context = self.read(self.api, f"{s}/context/?format={fmt}").json()
            assert isinstance(context.get("messages"), list), context
        self.read(self.api, f"{s}/messages/?state=all")
        self.read(self.html, f"/sessions/{session_id}/")
        if not full:
            return
        status = self.read(self.api, f"{s}/status/").json()
        parts = ("system_prompt", "tool_definitions", "messages", "summary")
        assert status["used"] == sum(status[p] for p in parts), status
        from sessions_app.models import AgentSession

        # The stored level and usage (what lists, the level filter and the dashboard read in SQL)
        # are STATUS's after every accepted write.
        stored = AgentSession.objects.values("level", "usage_percent").get(pk=session_id)
        assert stored == {"level": status["level"], "usage_percent": status["usage_percent"]}, (stored, status)
        session = self.read(self.api, f"{s}/").json()
        self.read(self.api, f"{s}/compactions/")
        self.read(self.html, f"/projects/{session['project']}/")
        self.read(self.admin, f"/admin/sessions_app/agentsession/?project__id__exact={session['project']}")
        self.read(self.admin, f"/admin/sessions_app/agentsession/{session_id}/change/")
        self.read(self.admin, f"/admin/sessions_app/message/?session__id__exact={session_id}")
        from sessions_app.models import Message

        newest = Message.objects.filter(session_id=session_id).order_by("-seq").values_list("pk", flat=True).first()
        if newest is not None:
            self.read(self.admin, f"/admin/sessions_app/message/{newest}/change/")

    def compact_and_revert(self, session_id: int) -> None:
        """A few old tool outputs appended (so there is something to prune around what was
        written), a dry run, then a compaction, read back and reverted."""
        from sessions_app.models import AgentSession

        s = f"{API}/sessions/{session_id}"
        padding = agent_rounds(2, seed=next(PADDING_SEEDS), output_lines=20)  # tool ids of their own
        padded = self.write("post", f"{s}/messages/", padding)
        if AgentSession.objects.get(pk=session_id).status == "active":
            assert padded.status_code == 201, f"appending to session {session_id}: {padded.content[:500]!r}"
        self.write("post", f"{s}/compactions/", {"level": "compact", "dry_run": True})
        self.compaction(session_id, "compact")  # test_compactions sends the other levels

    def compaction(self, session_id: int, level: str) -> None:
        """One compaction: it succeeds (or skips, or is refused with a 4xx), reads back, reverts."""
        from sessions_app.models import Message

        response = self.write("post", f"{API}/sessions/{session_id}/compactions/", {"level": level})
        if response.status_code != 202:
            return
        record = response.json()
        assert record["status"] in ("succeeded", "skipped"), f"the {level} of session {session_id}: {record}"
        if record["status"] != "succeeded":
            return
        self.reads(session_id, full=False)
        changed = Message.objects.filter(session_id=session_id, compaction_id=record["id"]).values_list("pk", flat=True)
        if changed:
            self.read(self.html, f"/messages/{changed[0]}/original/")
        for checkpoint in self.read(self.api, f"{API}/sessions/{session_id}/checkpoints/").json()["results"][:1]:
            self.read(self.api, f"{API}/checkpoints/{checkpoint['id']}/")
        self.revert(record)
        for fmt in ("anthropic", "openai"):  # what the revert restored is a valid request again
            self.read(self.api, f"{API}/sessions/{session_id}/context/?format={fmt}")

    def revert(self, record: dict[str, Any]) -> None:
        """Revert a succeeded compaction: 200, or a 409 when it changed no message (nothing to revert)."""
        reverted = self.write("post", f"{API}/compactions/{record['id']}/revert/", {})
        expected = 200 if record["revertible_until"] else 409
        assert reverted.status_code == expected, f"revert {record}: {reverted.status_code} {reverted.content[:500]!r}"

    def fresh_session(self, **kwargs: Any) -> int:
        kwargs.setdefault("name", "fresh")
        session = agent_sessions.session_create(user=self.team.bob.user, project=self.project, **kwargs)
        self.current_session = session.pk
        return session.pk


def same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: a number is its value, however written (PostgreSQL's jsonb answers
    ``1e+16`` as ``10000000000000000``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b, strict=True))
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        try:
            return a == b or float(a) == float(b)
        except OverflowError:
            return False
    return type(a) is type(b) and a == b


def error_body(response: Any, where: str) -> dict[str, Any]:
    """A refusal: a 4xx whose JSON body has ``detail`` and ``code`` strings."""
    assert 400 <= response.status_code < 500, f"{where} answered {response.status_code}: {response.content[:800]!r}"
    try:
        body = json.loads(response.content)
    except ValueError:
        pytest.fail(f"{where} answered {response.status_code} with no JSON: {response.content[:500]!r}")
    assert isinstance(body, dict), f"{where} answered {response.status_code} {body!r}"
    assert isinstance(body.get("detail"), str) and body["detail"], f"{where}: {response.status_code} {body} (detail?)"
    assert isinstance(body.get("code"), str) and body["code"], f"{where}: {response.status_code} {body} (code?)"
    return body


@pytest.fixture(autouse=True)
def _bounded_shrinking(monkeypatch: pytest.MonkeyPatch) -> None:
    from hypothesis.internal.conjecture import engine

    monkeypatch.setattr(engine, "MAX_SHRINKING_SECONDS", SHRINK_SECONDS)


@pytest.fixture(autouse=True)
def _quiet_server_errors() -> Any:
    """A server error fails the example with its own traceback: Django's log of each one (thousands
    while shrinking) would only bury it."""
    logger = logging.getLogger("django.request")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


@pytest.fixture
def world(team: Team, settings: Any) -> Any:
    from django.contrib.auth import get_user_model

    from sessions_app.models import CompactionPolicy, Project

    settings.ANTHROPIC_API_KEY = ""  # offline counts and summaries: no network
    # A policy that prunes what little the examples write, so compactions succeed and get reverted.
    CompactionPolicy.objects.filter(project=team.project).update(
        min_saving_tokens=1, protect_tool_tokens=0, keep_recent_turns=1, keep_recent_messages=2
    )
    team.project.refresh_from_db()
    theirs = Project.objects.get(name="Mallory's own")
    other = agent_sessions.session_create(user=team.mallory.user, project=theirs, name="theirs")
    html = Client()
    html.force_login(team.bob.user)
    admin = Client()
    admin.force_login(get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123"))
    yield World(team=team, api=Client(), html=html, admin=admin, other_project=theirs.pk, other_session=other.pk)


def start(world: World) -> None:
    world.log.clear()
    world.current_session = None


# ----------------------------------------------------------------------------- projects


@SETTINGS
@given(
    body=st.one_of(
        hj.mutated(hj.with_extra(st.fixed_dictionaries({"name": hj.text(15)}, optional={"description": hj.text(15)}))),
        hj.JSON_ANY,
    ),
    ascii_only=st.booleans(),
)
@surveyed
def test_create_project(world: World, body: Any, ascii_only: bool) -> None:
    start(world)
    response = world.write("post", f"{API}/projects/", body, ascii_only=ascii_only)
    if response.status_code >= 300:
        return
    project = response.json()["id"]
    world.read(world.api, f"{API}/projects/{project}/")
    world.read(world.api, f"{API}/projects/")
    world.read(world.html, "/projects/")
    world.read(world.html, f"/projects/{project}/")
    world.read(world.html, f"/projects/{project}/settings/")
    world.read(world.admin, "/admin/sessions_app/project/")
    world.read(world.admin, f"/admin/sessions_app/project/{project}/change/")
    created = world.write("post", f"{API}/sessions/", {"project": project, "name": "in the new project"})
    assert created.status_code == 201, created.content
    world.read_back(created.json()["id"], compact=False)


# ----------------------------------------------------------------------------- sessions


@SETTINGS
@given(body=hj.session_bodies(PROJECT_REFS), parent=SESSION_REFS, ascii_only=st.booleans())
@surveyed
def test_create_session(world: World, body: Any, parent: Any, ascii_only: bool) -> None:
    start(world)
    world.fresh_session()  # a possible parent
    if isinstance(body, dict) and parent is not None:
        body = {**body, "parent": parent}
    response = world.write("post", f"{API}/sessions/", body, ascii_only=ascii_only)
    if response.status_code < 300:
        world.read_back(response.json()["id"])


@SETTINGS
@given(body=hj.patch_bodies(), ascii_only=st.booleans())
@surveyed
def test_patch_session(world: World, body: Any, ascii_only: bool) -> None:
    start(world)
    session = world.fresh_session()
    response = world.write("patch", f"{API}/sessions/{session}/", body, ascii_only=ascii_only)
    if response.status_code < 300:
        world.read_back(session)


# ----------------------------------------------------------------------------- messages


@SETTINGS
@given(body=hj.message_batches(), ascii_only=st.booleans(), window=st.sampled_from([None, None, 1024]))
@surveyed
def test_append_messages(world: World, body: Any, ascii_only: bool, window: int | None) -> None:
    start(world)
    session = world.fresh_session(context_window=window)  # a small window: the append compacts on its own
    path = f"{API}/sessions/{session}/messages/"
    response = world.write("post", path, body, ascii_only=ascii_only)
    if response.status_code >= 300:
        return
    stored = response.json()["messages"]
    every = world.read(world.api, f"{path}?state=all&limit=1000").json()["results"]
    by_id = {m["id"]: m for m in every}
    for message in stored:
        assert message["id"] in by_id, f"message {message['id']} was answered but isn't listed"
        if by_id[message["id"]]["state"] == "active":
            listed = by_id[message["id"]]["content"]
            assert same_json(listed, message["content"]), f"stored {listed!r}, answered {message['content']!r}"
    if stored and all(m["client_id"] for m in stored) and len(stored) == len(every):
        # A retry (every message has a client id) stores nothing twice: it answers the stored rows.
        again = world.write("post", path, body, ascii_only=ascii_only)
        assert again.status_code == 201, again.content[:500]
        assert [m["id"] for m in again.json()["messages"]] == [m["id"] for m in stored]
        assert world.read(world.api, f"{path}?state=all").json()["count"] == len(every)
    world.read_back(session)


# ----------------------------------------------------------------------------- transcript sync


@st.composite
def upload_plans(draw: Any) -> dict[str, Any]:
    lines = draw(hj.claude_code_lines(session="cc-sync"))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(lines) - 1)), max_size=2))))
    chunks = ["".join(lines[a:b]) for a, b in itertools.pairwise([0, *cuts, len(lines)])]
    return {
        "chunks": [c for c in chunks if c] or [""],
        "project": draw(
            hj.sometimes(st.just(Ref("project_str")), st.one_of(st.just(Ref("project_name")), hj.HOSTILE), 10)
        ),
        "external_id": draw(hj.sometimes(st.none(), hj.HOSTILE_STR, 10)),  # None: a fresh one
        "bad_offset": draw(hj.sometimes(st.none(), st.tuples(st.integers(0, 2), hj.HOSTILE_NUMBER), 15)),
        "final": draw(st.sampled_from([True, False, "last"])),
        "name": draw(hj.sometimes(st.just(""), hj.HOSTILE_STR, 15)),
        "extra": draw(hj.sometimes(st.just({}), hj.JSON_OBJECT, 5)),
    }


@SETTINGS
@given(plan=upload_plans())
@surveyed
def test_transcript_sync(world: World, plan: dict[str, Any]) -> None:
    start(world)
    external_id = plan["external_id"] if plan["external_id"] is not None else f"cc-sync-{next(EXTERNAL_IDS)}"
    offset, touched = 0, set()
    for n, chunk in enumerate(plan["chunks"]):
        final = plan["final"] is True or (plan["final"] == "last" and n == len(plan["chunks"]) - 1)
        sent_offset: Any = offset
        if plan["bad_offset"] is not None and plan["bad_offset"][0] == n:
            sent_offset = plan["bad_offset"][1]
        body = {
            **plan["extra"],
            "project": plan["project"],
            "external_id": external_id,
            "offset": sent_offset,
            "lines": chunk,
            "final": final,
            "name": plan["name"],
        }
        response = world.write("post", f"{API}/sessions/transcript/", body)
        if response.status_code == 409:
            expected = response.json().get("expected_offset")
            assert expected is None or isinstance(expected, int), response.json()
            continue
        if response.status_code >= 300:
            continue
        answer = response.json()
        offset = answer["offset"]
        touched.update([answer["session"], *answer["sidechains"]])
        world.read(world.api, f"{API}/sessions/{answer['session']}/status/")
        world.read(world.api, f"{API}/sessions/{answer['session']}/context/")
    for n, session in enumerate(sorted(touched)[:2]):  # the main session, and one sub-agent's
        world.read_back(session, compact=n == 0)


# ----------------------------------------------------------------------------- import

FORMATS = ["claude-code", "openai", "anthropic"]
FILE_NAMES = hj.sometimes(
    st.sampled_from(["t.jsonl", "t.json", "session"]),
    st.sampled_from(
        [
            "a" * 250 + ".json",
            "é" * 240 + ".jsonl",
            "x" * 300,
            "n" * 201,
            "../../etc/passwd",
            "name with spaces.json",
            "\u202egnp.json",
            ".json",
            "a.b.c.json",
            "<b>bold</b>.json",
        ]
    ),
    35,
)


@st.composite
def imports(draw: Any) -> dict[str, Any]:
    fmt = draw(st.sampled_from(FORMATS))
    fields: dict[str, Any] = {
        "format": draw(hj.sometimes(st.just(fmt), st.one_of(st.sampled_from(FORMATS), hj.form_text(100)), 10)),
        "project": draw(
            hj.sometimes(st.just(Ref("project_str")), st.one_of(st.just(Ref("project_name")), hj.form_text(100)), 10)
        ),
    }
    optional = {
        "name": hj.form_text(15),
        "model": hj.sometimes(st.just("claude-sonnet-4-5"), hj.form_text(100), 20),
        "context_window": hj.sometimes(st.just("8192"), st.sampled_from(["0", "-1", str(2**80), "1e3", "x", ""]), 15),
        "auto_compact": hj.sometimes(st.sampled_from(["true", "false"]), st.sampled_from(["", "maybe"]), 15),
        "episode": hj.sometimes(st.just("0"), st.sampled_from(["1", "-1", str(2**64), "x"]), 15),
    }
    for name, strategy in optional.items():
        if draw(st.booleans()):
            fields[name] = draw(strategy)
    return {"fields": fields, "content": draw(hj.import_files(fmt)), "file_name": draw(FILE_NAMES)}


@settings(SETTINGS, max_examples=2 * EXAMPLES)  # most uploads are refused, cheaply
@given(upload=imports())
@surveyed
def test_import(world: World, upload: dict[str, Any]) -> None:
    start(world)
    fields: dict[str, str | SimpleUploadedFile] = {k: str(world.resolve(v)) for k, v in upload["fields"].items()}
    fields["file"] = SimpleUploadedFile(upload["file_name"], upload["content"])
    response = world.write("post", f"{API}/sessions/import/", fields, multipart=True)
    if response.status_code >= 300:
        return
    answer = response.json()
    world.read_back(answer["session"])
    for side in answer.get("sidechains", [])[:2]:
        world.read_back(side, compact=False)


# ----------------------------------------------------------------------------- compactions


@SETTINGS
@given(
    body=st.one_of(
        hj.mutated(
            st.fixed_dictionaries(
                {},
                optional={
                    "level": st.sampled_from(["compact", "summarize", "handoff"]),
                    "dry_run": st.booleans(),
                    "instructions": hj.text(10),
                },
            )
        ),
        hj.JSON_ANY,
    ),
    ascii_only=st.booleans(),
)
@surveyed
def test_compactions(world: World, body: Any, ascii_only: bool) -> None:
    start(world)
    session = world.fresh_session()
    world.write("post", f"{API}/sessions/{session}/messages/", agent_rounds(3, seed=7, output_lines=30))
    response = world.write("post", f"{API}/sessions/{session}/compactions/", body, ascii_only=ascii_only)
    if response.status_code >= 300:
        return
    answer = response.json()
    if response.status_code == 202:
        assert answer["status"] in ("succeeded", "skipped"), answer
        world.read(world.api, f"{API}/compactions/{answer['id']}/")
        if answer["status"] == "succeeded":
            world.reads(session, full=False)
            world.revert(answer)
    world.read_back(session)


# ----------------------------------------------------------------------------- handoff


@SETTINGS
@given(
    session_body=hj.session_bodies(st.just(Ref("project"))),
    messages=hj.message_batches(),
    body=st.one_of(hj.mutated(st.fixed_dictionaries({}, optional={"continue": st.booleans()})), hj.JSON_ANY),
)
@surveyed
def test_handoff(world: World, session_body: Any, messages: Any, body: Any) -> None:
    start(world)
    created = world.write("post", f"{API}/sessions/", session_body)
    session = created.json()["id"] if created.status_code == 201 else world.fresh_session()
    world.write("post", f"{API}/sessions/{session}/messages/", messages)
    response = world.write("post", f"{API}/sessions/{session}/handoff/", body)
    if response.status_code >= 300:
        valid = isinstance(body, dict) and set(body) <= {"continue"} and isinstance(body.get("continue", False), bool)
        assert not valid, f"handing off active session {session} with {body}: {response.content[:500]!r}"
        return
    document = response.json()
    world.read(world.api, f"{API}/handoffs/{document['id']}/")
    for fmt in ("txt", "md", "json"):
        world.read(world.api, f"{API}/handoffs/{document['id']}/download/?format={fmt}")
    world.read_back(session)
    if document.get("continuation"):
        world.read_back(document["continuation"], compact=False)


# ----------------------------------------------------------------------------- count_tokens


def _count_body_is_valid(body: Any) -> bool | None:
    """False when the body breaks what Anthropic's count_tokens documents for ``system`` and
    ``tools`` (a string or a list of text blocks; a list of tool objects); None: no opinion."""
    if not isinstance(body, dict):
        return False
    system, tools = body.get("system"), body.get("tools")
    if isinstance(system, list) and not all(
        isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str) for b in system
    ):
        return False
    if isinstance(tools, list) and not all(isinstance(t, dict) for t in tools):
        return False
    return None


COUNT_BASE = st.fixed_dictionaries(
    {"model": st.just("claude-sonnet-4-5"), "messages": st.just([{"role": "user", "content": "Hello"}])},
    optional={"system": hj.SYSTEMS, "tools": hj.TOOLS},
)


@settings(SETTINGS, max_examples=4 * EXAMPLES)
@given(
    body=st.one_of(
        hj.mutated(hj.anthropic_requests()),
        hj.mutated(COUNT_BASE, most=1),
        COUNT_BASE.flatmap(
            lambda base: st.fixed_dictionaries(
                {},
                optional={
                    "system": st.lists(st.one_of(hj.JSON_LEAVES, hj.text_block), max_size=3),
                    "tools": st.lists(st.one_of(hj.JSON_LEAVES, hj.tool_schemas), max_size=3),
                },
            ).map(lambda odd: {**base, **odd})
        ),
        hj.JSON_ANY,
    ),
    ascii_only=st.booleans(),
)
@surveyed
def test_count_tokens(world: World, body: Any, ascii_only: bool) -> None:
    start(world)
    response = world.write("post", f"{API}/count_tokens/", body, ascii_only=ascii_only)
    if response.status_code < 300:
        answer = response.json()
        assert isinstance(answer["input_tokens"], int) and answer["input_tokens"] >= 0, answer
        assert _count_body_is_valid(body) is not False, (
            f"POST /count_tokens/ accepted a body whose system or tools aren't what Anthropic documents "
            f"(an Anthropic client would get a 400): {_describe(body)} -> {answer}"
        )


# ----------------------------------------------------------------------------- session list filters


@settings(SETTINGS, max_examples=4 * EXAMPLES)
@given(
    project=hj.sometimes(st.just(Ref("project_str")), st.one_of(hj.form_text(100), st.integers().map(str)), 50),
    status=hj.sometimes(st.sampled_from(["", "active", "handed_off", "archived"]), hj.form_text(100), 40),
    q=hj.form_text(30),
)
@surveyed
def test_list_sessions_filters(world: World, project: Any, status: str, q: str) -> None:
    start(world)
    project = str(world.resolve(project))
    response = world.send(world.api, "get", f"{API}/sessions/", data={"project": project, "status": status, "q": q})
    where = f"GET {API}/sessions/?project={project!r}&status={status!r}&q={q!r}"
    if response.status_code != 200:
        error_body(response, where)
        return
    project_ok = project == "" or (project.isascii() and project.isdigit())
    status_ok = status in ("", "active", "handed_off", "archived")
    assert project_ok and status_ok, f"{where} answered 200 ({response.json()['count']} sessions), not a 400"


# ----------------------------------------------------------------------------- one field at a time
#
# The tests above mix hostile values into random bodies, which finds a given (field, value) pair
# only now and then. These take one valid body per endpoint and put one value that a column can't
# hold, or only just can, into one field of it: a small, finite space Hypothesis covers quickly
# (it doesn't repeat a case), with a light read-back after each success.

COLUMN_BREAKERS = [
    "c" * 256,  # past the longest varchar (255)
    "b" * 200,  # exactly a name's size: fits, and what is built from it may not
    "b" * 201,
    "m" * 100,
    "m" * 101,
    "x\x00y",
    "x\ud83dy",
    "2025-06-01T10:00:00+16:00",
    "0001-01-01T00:00:00+14:00",
    "9999-12-31T23:59:59-01:00",
    "2025-06-01T10:00:00+05:30:30.5",
    hj.Raw("1e999"),
    2**64,
    -1,
    hj._deep(65, "dict"),
    None,
]
BASE_BATCH = [
    {
        "role": "user",
        "content": "Fix the failing test",
        "client_id": "c-1",
        "created_at": "2025-06-01T10:00:00Z",
        "metadata": {"source": "cli"},
    },
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Running it."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "pytest"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1 failed"}]},
    {
        "role": "assistant",
        "content": "Reading it.",
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Read", "arguments": '{"p": "a"}'}}],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "def test(): ..."},
]
BASE_SESSION = {
    "name": "one field",
    "model": "claude-sonnet-4-5",
    "system_prompt": "Be brief.",
    "tools": [{"name": "Bash", "description": "Run", "input_schema": {"type": "object", "properties": {}}}],
    "external_id": "ext",
    "context_window": 8192,
    "auto_compact": True,
}
BASE_FILES = {
    "anthropic": {
        "model": "claude-sonnet-4-5",
        "system": "Be brief.",
        "tools": [{"name": "Bash", "input_schema": {"type": "object"}}],
        "messages": [
            {"role": "user", "content": "Fix it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok"}]},
        ],
    },
    "openai": {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Fix it"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Read", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "ok"},
        ],
    },
    "claude-code": [
        {
            "type": "user",
            "uuid": "u1",
            "parentUuid": None,
            "sessionId": "cc-one",
            "isSidechain": False,
            "timestamp": "2025-06-01T10:00:00Z",
            "message": {"role": "user", "content": "Fix it"},
        },
        {
            "type": "assistant",
            "uuid": "u2",
            "parentUuid": "u1",
            "sessionId": "cc-one",
            "isSidechain": False,
            "timestamp": "2025-06-01T10:00:01Z",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "model": "claude-opus-4-5",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}}],
            },
        },
        {
            "type": "user",
            "uuid": "u3",
            "parentUuid": "u2",
            "sessionId": "cc-one",
            "isSidechain": False,
            "timestamp": "2025-06-01T10:00:02Z",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a"}]},
        },
    ],
}
PAIRED = {"toolu_1", "call_1"}  # a tool call's id appears in its result too: both change together


def _paths(value: Any) -> list[tuple]:
    return [p for p in hj._nodes(value) if p]


def put(value: Any, path: tuple, atom: Any) -> Any:
    """A copy of ``value`` with ``atom`` at ``path`` (and wherever the id at ``path`` recurs)."""
    import copy

    value = copy.deepcopy(value)
    parent = hj._get(value, path[:-1])
    old = parent[path[-1]]
    parent[path[-1]] = atom
    if isinstance(old, str) and old in PAIRED:
        for other in _paths(value):
            holder = hj._get(value, other[:-1])
            if holder[other[-1]] == old:
                holder[other[-1]] = atom
    return value


def one_field(base: Any) -> st.SearchStrategy:
    return st.tuples(st.sampled_from(_paths(base)), st.sampled_from(COLUMN_BREAKERS)).map(lambda pair: put(base, *pair))


@settings(SETTINGS, max_examples=4 * EXAMPLES)
@given(body=one_field(BASE_BATCH))
@surveyed
def test_one_field_of_messages(world: World, body: Any) -> None:
    start(world)
    session = world.fresh_session()
    response = world.write("post", f"{API}/sessions/{session}/messages/", body)
    if response.status_code < 300:
        world.reads(session, full=False)


@settings(SETTINGS, max_examples=4 * EXAMPLES)
@given(body=one_field(BASE_SESSION))
@surveyed
def test_one_field_of_sessions(world: World, body: Any) -> None:
    """A session, then a handoff that continues it in a new one: what the first holds, the second
    takes over (a name of 200 characters plus " (continued)" must still make a session)."""
    start(world)
    body = {**body, "project": world.project.pk}
    if body.get("external_id") == "ext":
        body["external_id"] = f"ext-{next(EXTERNAL_IDS)}"
    response = world.write("post", f"{API}/sessions/", body)
    if response.status_code >= 300:
        return
    session = response.json()["id"]
    handoff = world.write("post", f"{API}/sessions/{session}/handoff/", {"continue": True})
    assert handoff.status_code == 201, f"handing off session {session} ({body}): {handoff.content[:500]!r}"
    for each in (session, handoff.json().get("continuation")):
        if each:
            world.read(world.api, f"{API}/sessions/{each}/context/")
            world.read(world.html, f"/sessions/{each}/")


@st.composite
def one_field_files(draw: Any) -> dict[str, Any]:
    fmt = draw(st.sampled_from(list(BASE_FILES)))
    value = draw(one_field(BASE_FILES[fmt]))
    lines = fmt == "claude-code"
    content = "".join(hj.dumps(event) + "\n" for event in value) if lines else hj.dumps(value)
    return {"format": fmt, "content": content.encode()}


@settings(SETTINGS, max_examples=4 * EXAMPLES)
@given(upload=one_field_files())
@surveyed
def test_one_field_of_imports(world: World, upload: dict[str, Any]) -> None:
    start(world)
    fields = {
        "format": upload["format"],
        "project": str(world.project.pk),
        "file": SimpleUploadedFile("one-field.json", upload["content"]),
    }
    response = world.write("post", f"{API}/sessions/import/", fields, multipart=True)
    if response.status_code < 300:
        answer = response.json()
        for session in [answer["session"], *answer.get("sidechains", [])][:2]:
            world.reads(session, full=False)
