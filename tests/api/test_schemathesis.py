"""API fuzzing: schemathesis generates requests from the OpenAPI schema the service serves at
``/api/schema/`` and sends them to pytest-django's live server, authenticated as a project admin.

Every answer must be a non-5xx, with a status code the schema documents, the content type it
documents, and a body that matches the documented schema. Path parameters hit real objects (a
project, a session with messages, a summarize compaction with its checkpoint, a handoff) in most
cases and generated values in the rest. Bounded and derandomized, so CI runs the same cases every
time: the examples phase, the coverage phase (boundary and invalid values, built deterministically
from the schema) and the fuzzing phase with ``MAX_EXAMPLES`` per operation, positive and negative.

The schema is read at collection time from the same ``/api/schema/`` view, in-process (one pytest
test per operation, each with freshly seeded data); ``test_live_schema_is_the_fuzzed_one`` checks the
live server serves exactly it. (``schemathesis.pytest.from_fixture``, which would load it from the
live server lazily, reads ``Node._nodeid``, which pytest 9 no longer has.)
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from sessions_app.services import agent_sessions, budgets, compaction_runs, handoffs, projects
from tests.conftest import Persona, make_persona
from tests.sessions_app.compaction_helpers import agent_rounds, append

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SCHEMA_PATH = "/api/schema/"
# CI's budget; CTX_FUZZ_EXAMPLES=500 (say) digs deeper on a workstation, CTX_FUZZ_SEED varies the cases.
MAX_EXAMPLES = int(os.environ.get("CTX_FUZZ_EXAMPLES", "15"))
SEED = int(os.environ.get("CTX_FUZZ_SEED", "20260505"))
# Of the cases whose path names an object, this share (out of 4) get a real object's id.
REAL_SHARE = 3

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

# The real ids of the running test's objects, for the path-parameter hook below.
REAL_IDS: dict[str, str] = {}


def _load_schema() -> Any:
    from django.core.wsgi import get_wsgi_application

    config = schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "generation": {"mode": "all", "max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
            "phases": {
                "examples": {"enabled": True},
                "coverage": {"enabled": True},
                # No feedback from earlier answers: the cases depend on the seed alone.
                "fuzzing": {
                    "enabled": True,
                    "extra-data-sources": {"responses": False},
                    "error-feedback": {"enabled": False},
                },
                "stateful": {"enabled": False},
            },
        }
    )
    loaded = schemathesis.openapi.from_wsgi(SCHEMA_PATH, get_wsgi_application(), config=config)
    loaded.app = None  # read in-process; the cases go over HTTP to the live server
    return loaded


schema = _load_schema()
LOADED = copy.deepcopy(schema.raw_schema)  # as read (generation resolves parts of it in place)


@schema.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any] | None) -> st.SearchStrategy:
    """Fuzzing phase: most cases name a real object, the rest keep the generated value."""
    real = {name: REAL_IDS[name] for name in path_parameters or {} if name in REAL_IDS}
    if not real:
        return st.just(path_parameters)
    assert path_parameters is not None  # the real ids are named in it
    return st.sampled_from([{**path_parameters, **real}] * REAL_SHARE + [path_parameters])


# What ``POST /sessions/import/`` gets as its file when the case is about another field: generated
# bytes only ever exercise the refusal of a file that is no transcript.
TRANSCRIPT = json.dumps(
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}
).encode()

# Where a project is named outside the path: ``GET /sessions/?project=``, ``POST /sessions/``'s and
# ``POST /sessions/import/``'s ``project``.
PROJECT_REFS = {"query": ("project",), "body": ("project",)}


def aim_at_real_objects(case: Any) -> None:
    """The examples and coverage phases build their cases without the hook above (``0``, ``""``…):
    point them at the seeded objects, except the one parameter a case is about (its boundary or
    invalid values still go out as generated)."""
    from schemathesis.generation.meta import TestPhase

    meta = case.meta
    if meta is None or meta.phase.name == TestPhase.FUZZING:
        return
    location = meta.phase.data.parameter_location
    about = (location.value if location is not None else None, meta.phase.data.parameter)
    for name in case.path_parameters or {}:
        if name in REAL_IDS and about != ("path", name):
            case.path_parameters[name] = REAL_IDS[name]
    for location, container in (("query", case.query), ("body", case.body)):
        if not isinstance(container, dict):
            continue
        for name in PROJECT_REFS[location]:
            if name in container and about != (location, name):
                real = REAL_IDS["project_id"]
                container[name] = int(real) if isinstance(container[name], int) else real
    if case.path.endswith("/import/") and isinstance(case.body, dict) and about[1] not in ("file", "format"):
        case.body.update(file=TRANSCRIPT, format="anthropic")


@dataclass
class Seeded:
    admin: Persona
    project: Any
    session: Any


@pytest.fixture
def seeded(transactional_db, settings) -> Iterator[Seeded]:
    """A project Alice administers, one busy session compacted (summarize: compaction + checkpoint)
    and a handoff document of it, and a budget; the session stays open for the operations under its path."""

    settings.ANTHROPIC_API_KEY = ""  # the offline summarizer and counts: no network, deterministic
    alice = make_persona("alice")
    project = projects.project_create(user=alice.user, name="Fuzzed")
    session = agent_sessions.session_create(
        user=alice.user, project=project, name="busy", context_window=30_000, auto_compact=False, external_id="ext-1"
    )
    append(session, agent_rounds(10, output_lines=60))
    record = compaction_runs.compaction_request(session=session, level="summarize", user=alice.user)
    compaction_runs.compaction_run(record.pk)
    checkpoint = session.checkpoints.order_by("-version").first()
    assert checkpoint is not None, "the summarize compaction wrote no checkpoint"
    document = handoffs.handoff_create(session=session, user=alice.user)
    budget, _ = budgets.budget_create(project=project, period="day", limit_usd="5.00", refuse=True)
    REAL_IDS.update(
        project_id=str(project.pk),
        session_id=str(session.pk),
        compaction_id=str(record.pk),
        checkpoint_id=str(checkpoint.pk),
        handoff_id=str(document.pk),
        budget_id=str(budget.pk),
    )
    yield Seeded(admin=alice, project=project, session=session)
    REAL_IDS.clear()


@schema.parametrize()
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # seeded once per operation, on purpose
def test_api_answers_as_documented(case: Any, seeded: Seeded, live_server) -> None:
    from sessions_app.models import AgentSession, SessionStatus

    aim_at_real_objects(case)
    if case.method == "DELETE" and case.path_parameters.get("session_id") == str(seeded.session.pk):
        # Deleting the shared session would turn every later case into a 404: delete a fresh one.
        doomed = agent_sessions.session_create(user=seeded.admin.user, project=seeded.project, name="doomed")
        case.path_parameters["session_id"] = str(doomed.pk)
    try:
        case.call_and_validate(
            base_url=live_server.url, headers={"Authorization": f"Bearer {seeded.admin.key}"}, checks=CHECKS
        )
    finally:
        # A handoff with ``continue`` (or a PATCH of ``status``) closes the shared session: reopen it.
        AgentSession.objects.filter(pk=seeded.session.pk).exclude(status=SessionStatus.ACTIVE).update(
            status=SessionStatus.ACTIVE
        )


def test_live_schema_is_the_fuzzed_one(live_server) -> None:
    import requests
    import yaml

    response = requests.get(f"{live_server.url}{SCHEMA_PATH}", timeout=30)
    assert response.status_code == 200
    assert yaml.safe_load(response.text) == LOADED
