"""Replaying recorded transcripts through the service, one message at a time, for the benchmarks
that need the real service (``bench/churn.py``, ``bench/continuation.py``).

Importing this module sets Django up for an in-process replay: a throw-away SQLite database unless
DATABASE_URL is set, Celery tasks run in-process (each compaction finishes before the next append),
and no Anthropic key — the offline summarizer, and never the real API (``bench/continuation.py
--summarizer fake`` points the settings at the local fake server itself).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ctxweb.settings")
os.environ.pop("REDIS_URL", None)  # tasks run in-process: each run completes before the next append
os.environ.pop("ANTHROPIC_API_KEY", None)
os.environ.pop("ANTHROPIC_BASE_URL", None)
_DB_DIR = tempfile.mkdtemp(prefix="ctx-bench-")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{_DB_DIR}/bench.sqlite3")
os.environ.setdefault("CTX_LOG_LEVEL", "WARNING")

import django  # noqa: E402

django.setup()

from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402

from compaction.tokens import OfflineTokenizer  # noqa: E402
from sessions_app.models import AgentSession, Compaction, Project  # noqa: E402
from sessions_app.selectors import usage  # noqa: E402
from sessions_app.services import agent_sessions, projects, recorded  # noqa: E402

SHARED = Path(os.environ.get("CTX_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data")
TOKENIZER = OfflineTokenizer()


def bench_user(username: str) -> User:
    """A migrated database and the user the benchmark acts as."""
    call_command("migrate", verbosity=0)
    user, _ = User.objects.get_or_create(username=username)
    return user


def calibrated_size(candidates: Iterable[recorded.Candidate], model: str) -> int:
    """The tokens the candidates' messages add to a session of ``model``, as the service counts them."""
    factor = usage.model_info(model).calibration
    return sum(
        round(TOKENIZER.count_message(c.message.role, c.message.content) * factor)
        for c in candidates
        if c.message is not None
    )


def session_new(
    *, user: User, project_name: str, preset_name: str, name: str, model: str, window: int
) -> tuple[Project, AgentSession]:
    """A project with the preset's policy and one session in it with its own context window."""
    project = projects.project_create(user=user, name=project_name)
    projects.policy_apply_preset(policy=project.policy, preset_name=preset_name)
    session = agent_sessions.session_create(user=user, project=project, name=name, model=model, context_window=window)
    return project, session


def new_compactions(project: Project, seen: set[int]) -> list[Compaction]:
    """The project's compactions not seen before, oldest first (they are then marked seen)."""
    found = list(Compaction.objects.filter(session__project=project).exclude(pk__in=seen).order_by("pk"))
    seen.update(record.pk for record in found)
    return found
