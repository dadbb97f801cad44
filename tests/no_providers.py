"""Loaded before Django's settings (``-p tests.no_providers`` in pyproject's addopts): the suite never
reaches a real model provider. A key or base URL the machine's environment holds (``ANTHROPIC_*``,
``OPENAI_*``) is dropped here, before settings read it and before any server, worker or agent CLI a
test starts inherits it; tests that want a provider give the fakes in ``tests/fakes/`` explicitly."""

from __future__ import annotations

import os

for _name in [name for name in os.environ if name.startswith(("ANTHROPIC_", "OPENAI_"))]:
    del os.environ[_name]
