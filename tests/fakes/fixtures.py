"""Pytest fixtures for the fake Anthropic server.

Import them into a conftest.py::

    from tests.fakes.fixtures import fake_anthropic, fake_anthropic_env  # noqa: F401
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .anthropic_server import FakeAnthropic


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A started FakeAnthropic on a free loopback port, stopped after the test."""
    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def fake_anthropic_env(fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> FakeAnthropic:
    """``fake_anthropic`` plus ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY pointing at it (API key "test")."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.base_url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test")
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    return fake_anthropic
