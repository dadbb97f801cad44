"""Shared fixtures: personas (healthchecks-style), API clients, and the real services.

Tests marked ``services`` need Postgres (DATABASE_URL), Redis (REDIS_URL) and, where they ask for
``celery_worker``, a real worker process. Without them they skip, except with
CTX_REQUIRE_SERVICES=1 (CI), where a missing service fails the run instead.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings as hypothesis_settings

from sessions_app.selectors import usage
from sessions_app.services import agent_sessions, exact_usage, keys, projects
from tests import seeded_rows
from tests.seeded_rows import pytest_runtest_teardown  # noqa: F401  # a hook, found by its name
from tests.shared_data import SHARED_DATA

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

    from sessions_app.models import Project

REQUIRE_SERVICES = os.environ.get("CTX_REQUIRE_SERVICES") == "1"
# How hard the property tests look (tests/hypothesis_budget.py scales each test's examples from it):
# ``dev`` for the loop at a desk, ``ci`` where CI is set, ``deep`` to dig (HYPOTHESIS_PROFILE=deep).
# Speed is measured in bench/, never asserted: a busy machine must not fail a property on time.
hypothesis_settings.register_profile("dev", max_examples=25, deadline=None)
hypothesis_settings.register_profile("ci", max_examples=100, deadline=None, print_blob=True)
hypothesis_settings.register_profile("deep", max_examples=1000, deadline=None, print_blob=True)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev"))
ROOT = Path(__file__).resolve().parents[1]


def xdist_worker() -> str:
    """This process's pytest-xdist worker ("gw0", "gw1" …), or "" when the suite runs in one process."""
    return os.environ.get("PYTEST_XDIST_WORKER", "")


def _postgres_configured() -> bool:
    return os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))


def _redis_configured() -> bool:
    return bool(os.environ.get("REDIS_URL"))


def need(condition: bool, reason: str) -> None:
    """Skip when a service or data set is missing; fail instead under CTX_REQUIRE_SERVICES=1."""
    if condition:
        return
    if REQUIRE_SERVICES:
        pytest.fail(f"CTX_REQUIRE_SERVICES=1 but {reason}")
    pytest.skip(reason)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not isinstance(item, pytest.Function):
            continue  # only test functions request fixtures
        if item.get_closest_marker("services"):
            item.fixturenames.insert(0, "_require_services")
        elif item.get_closest_marker("postgres"):
            item.fixturenames.insert(0, "_require_postgres")


@pytest.fixture
def _require_services() -> None:
    need(_postgres_configured(), "DATABASE_URL does not point at Postgres")
    need(_redis_configured(), "REDIS_URL is not set")


@pytest.fixture
def _require_postgres() -> None:
    need(_postgres_configured(), "DATABASE_URL does not point at Postgres")


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _no_rate_limits(settings) -> None:
    """The suite makes many calls with one key in a short while; the throttling tests turn limits on."""
    settings.CTX_RATE_LIMIT_KEY = ""
    settings.CTX_RATE_LIMIT_USER = ""


@pytest.fixture(autouse=True)
def _tasks_as_in_production(request: pytest.FixtureRequest) -> Iterator[None]:
    """Outside the tests that run a real worker, tasks run in-process (the embedded mode), and an
    ``on_commit`` callback fires when the transaction that queued it would commit in production.

    A non-transactional test wraps everything in an atomic block that never commits, so Django
    would hold every callback until the end of the test. Here the test's own block counts as "no
    transaction": a callback queued outside any further block runs at once, one queued inside a
    block runs when that block (the outermost one the code opened) exits without error."""
    if request.node.get_closest_marker("services"):
        yield
        return
    from django.db import connections, transaction

    from ctxweb.celery import app

    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True
    marker = request.node.get_closest_marker("django_db")
    if marker is None or marker.kwargs.get("transaction") or (marker.args and marker.args[0]):
        yield
        app.conf.task_always_eager = eager
        return
    request.getfixturevalue("_django_db_helper")
    baseline = {alias: len(connections[alias].savepoint_ids) for alias in connections}
    original_exit = transaction.Atomic.__exit__

    def exit_and_run(self, exc_type, exc_value, traceback):
        result = original_exit(self, exc_type, exc_value, traceback)
        connection = transaction.get_connection(self.using)
        alias = self.using or "default"
        if len(connection.savepoint_ids) <= baseline.get(alias, 0) and not connection.needs_rollback:
            pending, connection.run_on_commit = connection.run_on_commit, []
            for _, callback, _robust in pending:
                callback()
        return result

    original_on_commit = transaction.on_commit

    def on_commit_now(func, using=None, robust=False):
        connection = transaction.get_connection(using)
        if len(connection.savepoint_ids) <= baseline.get(using or "default", 0):
            func()  # no transaction of the code's own: Django runs it at once too
        else:
            original_on_commit(func, using=using, robust=robust)

    transaction.Atomic.__exit__ = exit_and_run  # type: ignore[method-assign]  # patched, restored below
    transaction.on_commit = on_commit_now
    try:
        yield
    finally:
        transaction.Atomic.__exit__ = original_exit  # type: ignore[method-assign]  # the patch undone
        transaction.on_commit = original_on_commit
        app.conf.task_always_eager = eager


@pytest.fixture(autouse=True)
def _webhooks_for_tests(settings) -> None:
    """Webhook tests' receivers listen on 127.0.0.1; retries come at once; a hung receiver costs 2 s."""
    settings.CTX_WEBHOOK_ALLOW_PRIVATE = True
    settings.CTX_WEBHOOK_BACKOFF_SECONDS = 0.0
    settings.CTX_WEBHOOK_TIMEOUT_SECONDS = 2.0


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix, tmp_path_factory) -> None:
    """The embedded mode's SQLite in a file, as ``make run`` keeps it. In memory, Django's live server
    hands its one connection to every request thread: two requests at once would run inside one
    transaction, one's rollback taking the other's rows, which no real server does. Durability is
    not what the tests are about: no fsync."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        database.setdefault("TEST", {})["NAME"] = str(tmp_path_factory.mktemp("sqlite") / "test.sqlite3")
        database.setdefault("OPTIONS", {})["init_command"] = "PRAGMA synchronous=OFF"


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup, django_db_blocker) -> Iterator[None]:
    """pytest-django's, and what the migrations seeded read for ``seeded_rows`` to put back. At the
    end, the proxy's recorder lanes stopped: they keep their connections, which would hold the test
    database open past its drop."""
    from sessions_app.api.proxy.recorder import RECORDER

    with django_db_blocker.unblock():
        seeded_rows.remember()
    yield
    RECORDER.stop()


@pytest.fixture(autouse=True)
def _fresh_model_profiles() -> Iterator[None]:
    """Model profiles are cached per process for a few seconds, and when a calibration lesson was last
    taken is remembered per process; a test's rollback and cache clearing must not leak."""

    usage.forget_model_profiles()
    exact_usage.forget_calibration_intervals()
    yield
    usage.forget_model_profiles()
    exact_usage.forget_calibration_intervals()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    need(SHARED_DATA.is_dir(), f"the shared transcripts are not at {SHARED_DATA} (set CTX_SHARED_DATA to their folder)")
    return SHARED_DATA


# ----------------------------------------------------------------------------- personas


@dataclass
class Persona:
    user: User
    key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"HTTP_AUTHORIZATION": f"Bearer {self.key}"}


def make_persona(username: str) -> Persona:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user(username=username, password=f"{username}-pass-123")
    _, key = keys.apikey_create(user=user, name="test")
    return Persona(user=user, key=key)


@dataclass
class Team:
    """Alice administers the project, Bob is a member, Carol a viewer, Mallory is outside it."""

    alice: Persona
    bob: Persona
    carol: Persona
    mallory: Persona
    project: Project


@pytest.fixture
def team(db) -> Team:
    from sessions_app.models import Role

    alice, bob, carol, mallory = (make_persona(n) for n in ("alice", "bob", "carol", "mallory"))
    project = projects.project_create(user=alice.user, name="Alpha")
    projects.membership_set(project=project, user=bob.user, role=Role.MEMBER)
    projects.membership_set(project=project, user=carol.user, role=Role.VIEWER)
    projects.project_create(user=mallory.user, name="Mallory's own")
    return Team(alice, bob, carol, mallory, project)


class Api:
    """A thin JSON client over Django's test client, authenticating with a persona's API key."""

    def __init__(self, client, persona: Persona | None) -> None:
        self.client = client
        self.headers = persona.auth if persona else {}

    def _call(self, method: str, path: str, data=None, **extra):
        import json

        kwargs = {**self.headers, **extra}
        if data is not None and not isinstance(data, bytes | str):
            data = json.dumps(data)
        return getattr(self.client, method)(path, data=data, content_type="application/json", **kwargs)

    def get(self, path: str, **extra):
        return self.client.get(path, **{**self.headers, **extra})

    def post(self, path: str, data=None, **extra):
        return self._call("post", path, data, **extra)

    def patch(self, path: str, data=None, **extra):
        return self._call("patch", path, data, **extra)

    def upload(self, path: str, fields: dict, **extra):
        """multipart/form-data, as a browser or ``curl -F`` sends it."""
        return self.client.post(path, data=fields, **{**self.headers, **extra})

    def delete(self, path: str, **extra):
        return self.client.delete(path, **{**self.headers, **extra})


@pytest.fixture
def staff(client):
    """Django's test client signed in as a superuser (Django admin's pages)."""
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_superuser("root", "root@example.invalid", "root-pass-123")
    client.force_login(user)
    return client


@pytest.fixture
def api_as(client):
    def make(persona: Persona | None) -> Api:
        return Api(client, persona)

    return make


@pytest.fixture
def session_of(team: Team):
    """A fresh session in the team's project, created by Alice."""

    def make(**kwargs) -> object:
        kwargs.setdefault("name", "s")
        return agent_sessions.session_create(user=team.alice.user, project=team.project, **kwargs)

    return make


class _Caught(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def proxy_failures():
    """What the proxy logged as its own failure (warnings and up): it forwards anyway, so only its log
    tells."""
    caught = _Caught()
    logger = logging.getLogger("sessions_app.api.proxy.views")
    logger.addHandler(caught)
    yield caught.records
    logger.removeHandler(caught)


def _closed_after(make_client, live_server):
    """A factory of SDK clients through ``live_server``'s proxy, closed once the test is done."""
    made = []

    def make(headers: dict[str, str], **kwargs) -> object:
        made.append(make_client(live_server, headers, **kwargs))
        return made[-1]

    yield make
    for sdk in made:
        sdk.close()


@pytest.fixture
def proxy_sdk(live_server):
    """Makes official-SDK clients through the live server's proxy (``tests/proxy_client.py``): each
    call returns once ctxweb has recorded it; closed after the test."""
    from tests.proxy_client import proxy_client

    yield from _closed_after(proxy_client, live_server)


@pytest.fixture
def proxy_openai_sdk(live_server):
    """As ``proxy_sdk``, with OpenAI's SDK through the OpenAI proxy."""
    from tests.proxy_client import openai_client

    yield from _closed_after(openai_client, live_server)


# ----------------------------------------------------------------------------- real worker


@pytest.fixture(scope="session")
def fake_anthropic_session() -> Iterator[object]:
    from tests.fakes.anthropic_server import FakeAnthropic

    with FakeAnthropic() as server:
        yield server


def queues_of(prefix: str) -> list[str]:
    """The three queues (counting, compaction, maintenance) a worker with this CTX_QUEUE_PREFIX serves."""
    return [prefix + kind for kind in ("counting", "compaction", "maintenance")]


def start_worker(*, queue: str, env: dict[str, str], log_path: Path) -> subprocess.Popen:
    """A real `celery worker` process listening on the queues of prefix ``queue`` (``env`` has the
    same CTX_QUEUE_PREFIX), answering a ping before it returns."""
    import sys
    import time

    from ctxweb.celery import app

    log_path.parent.mkdir(exist_ok=True)
    log = open(log_path, "w")  # noqa: SIM115 - the worker writes to it until it ends
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "ctxweb",
            "worker",
            "--pool=solo",
            "--concurrency=1",
            "--without-gossip",
            "--without-mingle",
            "--loglevel=INFO",
            "-Q",
            ",".join(queues_of(queue)),
            "-n",
            f"{queue}@%h",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"the Celery worker exited with {proc.returncode}; see {log_path}")
        if app.control.ping(destination=[f"{queue}@{os.uname().nodename}"], timeout=0.5):
            return proc
    proc.terminate()
    pytest.fail("the Celery worker did not answer a ping within 60 s")


def stop_worker(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


@pytest.fixture(scope="session")
def celery_worker(django_db_setup, django_db_blocker, fake_anthropic_session) -> Iterator[dict]:
    """A real `celery worker` process on Redis, using the test database and the fake Anthropic API."""
    from django.conf import settings
    from django.db import connection

    need(_postgres_configured(), "DATABASE_URL does not point at Postgres")
    need(_redis_configured(), "REDIS_URL is not set")
    with django_db_blocker.unblock():
        db_name = connection.settings_dict["NAME"]
    base = os.environ["DATABASE_URL"].rsplit("/", 1)[0]
    prefix = f"ctx-test-{os.getpid()}-"
    env = {
        **os.environ,
        "DATABASE_URL": f"{base}/{db_name}",
        "ANTHROPIC_API_KEY": "test-key",
        "ANTHROPIC_BASE_URL": fake_anthropic_session.base_url,
        "ANTHROPIC_MAX_RETRIES": "0",
        "CTX_EXACT_COUNT_DEBOUNCE_SECONDS": "0",
        "CTX_RETRY_BACKOFF_BASE": "0.2",
        "CTX_WEBHOOK_ALLOW_PRIVATE": "1",  # the tests' receivers listen on 127.0.0.1
        "CTX_WEBHOOK_BACKOFF_SECONDS": "0.2",
        "CTX_WEBHOOK_TIMEOUT_SECONDS": "1",
        "CTX_WEBHOOK_MAX_ATTEMPTS": "4",
        "CTX_QUEUE_PREFIX": prefix,
    }
    # This process sends where the worker listens (the router reads the prefix at each send).
    settings.CTX_QUEUE_PREFIX, before = prefix, settings.CTX_QUEUE_PREFIX
    proc = start_worker(
        queue=prefix, env=env, log_path=ROOT / "test-artifacts" / f"celery-worker-{xdist_worker() or 'main'}.log"
    )
    # "queue": where a test sends a compaction by hand (apply_async(queue=…)).
    compaction_queue = prefix + "compaction"
    yield {"process": proc, "queue": compaction_queue, "prefix": prefix, "fake": fake_anthropic_session, "env": env}
    stop_worker(proc)
    settings.CTX_QUEUE_PREFIX = before


@pytest.fixture
def fresh_budget_flags(team: Team) -> Iterator[None]:
    """The "has budgets" flag is cached by project id, and a rolled-back test's ids come again: forgotten
    before and after the test (``pytestmark = pytest.mark.usefixtures("fresh_budget_flags")``)."""
    from sessions_app.selectors.budgets import forget_project_budgets

    forget_project_budgets(team.project.pk)
    yield
    forget_project_budgets(team.project.pk)
