"""One stack (``tests.clients.stack``: gunicorn, its Celery worker, a fresh Postgres database) per xdist
worker, shared by the real-CLI tests that run there, with one FakeAnthropic and one FakeOpenAI behind
its proxy. Starting a stack (a database migrated, gunicorn, a Celery worker) is most of what a short
test costs; the tests keep apart by their projects. ``live`` hands a test that stack with both fakes
reset, names of projects its own and the access log from where the test begins.

test_claude_code_compaction_live.py runs a stack of its own: it changes a model's window for the
whole database and runs its tasks eagerly."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.clients.stack import Stack, access_log, ctxweb_stack, log_size
from tests.conftest import _postgres_configured, _redis_configured, need
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI

_tests = itertools.count(1)


@dataclass(frozen=True)
class Shared:
    stack: Stack
    anthropic: FakeAnthropic
    openai: FakeOpenAI


@dataclass(frozen=True)
class Live:
    """The shared stack as one test sees it."""

    stack: Stack
    anthropic: FakeAnthropic
    openai: FakeOpenAI
    tag: str  # unique among the tests of this stack
    log_from: int  # the access log's size when the test began

    def project(self, name: str) -> str:
        """A project name no other test on this stack uses."""
        return f"{name} {self.tag}"

    def user(self, name: str) -> str:
        """A user of this test alone: a member of the projects it makes, and of no other test's (an
        agent sending no ``ctxweb-project`` header records in its user's only project)."""
        return f"{name}-{self.tag}"

    def hits(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of the requests logged since the test began."""
        return access_log(self.stack.access_log, self.log_from)

    @property
    def proxy(self) -> str:
        return f"http://{self.stack.hostport}/proxy"


@pytest.fixture(scope="session")
def shared_stack(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Shared]:
    need(_postgres_configured(), "DATABASE_URL does not point at Postgres")
    need(_redis_configured(), "REDIS_URL is not set")
    tmp: Path = tmp_path_factory.mktemp("stack")
    with FakeAnthropic() as anthropic, FakeOpenAI() as openai:
        extra = {"CTX_PROXY_OPENAI_URL": openai.base_url}
        with ctxweb_stack(f"shared_{worker_id}", anthropic.base_url, tmp, extra) as stack:
            yield Shared(stack, anthropic, openai)


@pytest.fixture
def live(shared_stack: Shared) -> Live:
    shared_stack.anthropic.reset()
    shared_stack.openai.reset()
    stack = shared_stack.stack
    return Live(stack, shared_stack.anthropic, shared_stack.openai, f"t{next(_tests)}", log_size(stack.access_log))
