"""The suite never reaches a real provider, whatever key the machine's environment holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def test_no_provider_key_or_url_reaches_settings_or_the_environment():
    assert not [name for name in os.environ if name.startswith(("ANTHROPIC_", "OPENAI_"))]
    assert (settings.ANTHROPIC_API_KEY, settings.ANTHROPIC_BASE_URL, settings.OPENAI_API_KEY) == ("", None, "")


def test_a_key_in_the_machines_environment_is_dropped_before_the_suite_starts():
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-real", "ANTHROPIC_BASE_URL": "https://api.anthropic.com",
           "OPENAI_API_KEY": "sk-real", "DATABASE_URL": "sqlite:///:memory:"}  # fmt: skip
    env.pop("PYTEST_XDIST_WORKER", None)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
         f"{__file__}::test_no_provider_key_or_url_reaches_settings_or_the_environment"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stdout[-2000:]
