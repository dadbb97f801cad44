"""Fixtures the proxy's tests share."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def small_window(request: Any, team: Any) -> None:
    """The test module's ``MODEL`` with a window of its ``WINDOW`` tokens, and the team's project with
    ``proxy_compaction`` on."""
    from sessions_app.models import ModelProfile
    from sessions_app.selectors import usage
    from sessions_app.services import projects

    ModelProfile.objects.create(
        name=request.module.MODEL, context_window=request.module.WINDOW, max_output_tokens=1_000
    )
    usage.forget_model_profiles()
    policy = projects.policy_ensure(project=team.project)
    policy.proxy_compaction = True
    policy.save()


@pytest.fixture
def fake(settings: Any) -> Any:
    """The scripted Anthropic upstream, the proxy's upstream for the test (a module may define its own)."""
    from tests.fakes.anthropic_server import FakeAnthropic

    with FakeAnthropic() as server:
        settings.CTX_PROXY_UPSTREAM_URL = server.base_url
        yield server
