"""`ctx demo`: a small project a newcomer can look at straight away. Synthetic content only."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from compaction.messages import normalize_message
from compaction.model_prices import TokenUsage
from sessions_app.models import (
    AgentSession,
    DeliveryStatus,
    Project,
    RequestSource,
    SessionStatus,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEvent,
    WebhookFormat,
)
from sessions_app.selectors.prices import price_of
from sessions_app.services import (
    agent_sessions,
    auto_compaction,
    compaction_runs,
    ingest,
    projects,
    spend_rollup,
    webhooks,
)
from sessions_app.services.compaction_records import MAX_FAILURES, compaction_fail

DEMO_USER = "demo"
DEMO_PASSWORD = "demo"
DEMO_PROJECT = "Demo project"

_TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file from the workspace.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
    {
        "name": "run_tests",
        "description": "Run the test suite and return its output.",
        "input_schema": {"type": "object", "properties": {"target": {"type": "string"}}},
    },
]


def _coding_turns(n: int) -> list[dict]:
    turns: list[dict] = [{"role": "user", "content": "Fix the failing date parsing tests in utils/dates.py."}]
    for i in range(n):
        call_id = f"toolu_demo_{i:03d}"
        turns.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {i + 1}: let me look at the code and the test output."},
                    {
                        "type": "tool_use",
                        "id": call_id,
                        "name": "run_tests" if i % 2 else "read_file",
                        "input": {"target": "tests/test_dates.py"} if i % 2 else {"path": "utils/dates.py"},
                    },
                ],
            }
        )
        log = "\n".join(f"tests/test_dates.py::test_case_{j} {'FAILED' if j % 7 == 0 else 'PASSED'}" for j in range(60))
        turns.append(
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": call_id,
                        "content": log if i % 2 else "def parse(s):\n    ...\n" * 40,
                    },
                ],
            }
        )
    turns.append({"role": "assistant", "content": "## Decision: use datetime.fromisoformat and drop the regex parser."})
    turns.append({"role": "user", "content": "Great, now also handle time zones."})
    return turns


def _nightly_session(user, project: Project) -> AgentSession:
    """A session with automatic compaction on, appended a few turns at a time the way an agent sends
    them; each compaction its appends set off runs before the next ones (in this process, as the
    embedded mode does), so its chart shows the context growing and dropping at each level."""
    nightly = agent_sessions.session_create(
        user=user,
        project=project,
        name="Nightly agent (auto-compacted)",
        model="claude-sonnet-4-5",
        context_window=12_000,
        tools=_TOOLS,
        system_prompt="You are a careful coding agent. Explain decisions briefly.",
    )
    turns = [normalize_message(t) for t in _coding_turns(40)]
    for start in range(0, len(turns), _NIGHTLY_STEP):
        ingest.message_append(session=nightly, messages=turns[start : start + _NIGHTLY_STEP])
        follow = auto_compaction.append_followup(nightly.pk)
        if follow.compaction_id is not None:
            compaction_runs.compaction_run(follow.compaction_id)
        nightly.refresh_from_db()
        if nightly.status != SessionStatus.ACTIVE:
            break
    return nightly


def _paused_session(user, project: Project) -> AgentSession:
    """A session whose summaries kept failing until automatic compaction paused: what the dashboard's
    "Failed or paused" list and its Retry button are for. The failures are made up (no model ran)."""
    paused = agent_sessions.session_create(
        user=user,
        project=project,
        name="Paused agent (summaries failing)",
        model="claude-sonnet-4-5",
        context_window=10_000,
        tools=_TOOLS,
        system_prompt="You are a careful coding agent. Explain decisions briefly.",
    )
    ingest.message_append(session=paused, messages=[normalize_message(t) for t in _coding_turns(12)])
    for _ in range(MAX_FAILURES):
        record = compaction_runs.compaction_request(session=paused, level="summarize", user=None, trigger="auto")
        compaction_fail(record.pk, "Anthropic API error 529: overloaded (a made-up failure of the demo)")
    paused.refresh_from_db()
    return paused


def _demo_webhook(user, project: Project) -> None:
    """A disabled webhook with a short made-up log, so the webhooks page shows what a log looks like
    (nothing is ever sent: the address is reserved and the webhook is off)."""
    hook = webhooks.webhook_create(
        project=project,
        user=user,
        name="Team chat (demo, disabled)",
        url="https://hooks.example.invalid/ctxweb",
        events=[WebhookEvent.COMPACTION_SUCCEEDED, WebhookEvent.COMPACTION_FAILED, WebhookEvent.SESSION_PAUSED],
        format=WebhookFormat.SLACK,
        enabled=False,
    )
    now = timezone.now()
    for event, codes in ((WebhookEvent.COMPACTION_SUCCEEDED, [200]), (WebhookEvent.COMPACTION_FAILED, [500, 502, 200])):
        delivery = WebhookDelivery.objects.create(
            webhook=hook,
            event=event,
            payload={"text": f"[{project.name}] {event} (a made-up delivery of the demo)"},
            status=DeliveryStatus.DELIVERED,
            attempts=len(codes),
            last_status_code=codes[-1],
            next_attempt_at=now,
            delivered_at=now,
        )
        WebhookAttempt.objects.bulk_create(
            WebhookAttempt(delivery=delivery, at=now, status_code=code, duration_ms=120) for code in codes
        )


# Messages per append of the nightly session: small enough that compactions fall between appends.
_NIGHTLY_STEP = 6


@dataclass
class DemoResult:
    username: str
    password: str
    project: Project
    sessions: list[AgentSession]
    created: bool
    admin: bool  # whether the demo user may open Django admin (the embedded default)


def _demo_requests(user, sessions: list[AgentSession]) -> None:
    """A made-up provider request per reply of each session, spread over the last days, so the spend
    tables, the session pages' requests and the CSV downloads have something to show: what each read
    grows with the conversation, most of it from the provider's cache after the first."""
    now = timezone.now()
    rows = []
    for session in sessions:
        replies = list(session.messages.filter(role="assistant").order_by("seq").values_list("seq", flat=True))
        step = min(timedelta(hours=9), timedelta(days=7) / max(1, len(replies)))
        for n, seq in enumerate(replies):
            read = session.system_tokens + session.tool_tokens + 400 * seq
            cached = 0 if n == 0 else read - 400
            when = now - (len(replies) - n) * step  # over the last week, the newest an hour or more ago
            used = TokenUsage(input=read - cached, cache_write=400 if n else 0, cache_read=cached, output=120 + 9 * n)
            rows.append((session, seq, when, used))
    for session, seq, when, used in rows:
        spend_rollup.request_store(
            key=uuid.uuid5(_DEMO_REQUESTS, f"{session.pk}:{seq}"),
            session=session,
            project_id=session.project_id,
            user=user,
            created_at=when,
            model=session.model,
            input_tokens=used.input,
            cache_creation_input_tokens=used.cache_write,
            cache_read_input_tokens=used.cache_read,
            output_tokens=used.output,
            cost_usd=price_of(session.model, used, at=when),
            ttfb_ms=300.0 + 11 * seq,
            duration_ms=1800.0 + 37 * seq,
            status=200,
            source=RequestSource.PROXY,
        )


_DEMO_REQUESTS = uuid.UUID("0b7e1d2a-3c4f-4a5b-8c6d-7e8f9a0b1c2d")  # the namespace of the demo's request keys


@transaction.atomic
def demo_load() -> DemoResult:
    User = get_user_model()
    user, _ = User.objects.get_or_create(username=DEMO_USER, defaults={"email": "demo@example.invalid"})
    user.set_password(DEMO_PASSWORD)
    # Admin with a known password is for the embedded default alone; elsewhere a plain user.
    user.is_staff = user.is_superuser = settings.CTX_DEMO_ADMIN
    user.save()
    existing = Project.objects.filter(name=DEMO_PROJECT, memberships__user=user).first()
    if existing is not None:
        return DemoResult(
            DEMO_USER, DEMO_PASSWORD, existing, list(existing.sessions.order_by("pk")), False, user.is_staff
        )
    project = projects.project_create(user=user, name=DEMO_PROJECT, description="Synthetic sessions to look around.")
    specs = [
        (
            "Short chat",
            "claude-haiku-4-5",
            None,
            [],
            [
                {"role": "user", "content": "What is a context window?"},
                {
                    "role": "assistant",
                    "content": "The number of tokens a model can read at once: prompt, tools and conversation.",
                },
            ],
        ),
        # Windows sized so the sessions sit at different levels: compact, summarize.
        ("Bug hunt (tools)", "claude-sonnet-4-5", 10_000, _TOOLS, _coding_turns(10)),
        ("Long refactor", "gpt-4o", 10_000, _TOOLS, _coding_turns(16)),
    ]
    sessions = []
    for name, model, window, tools, turns in specs:
        session = agent_sessions.session_create(
            user=user,
            project=project,
            name=name,
            model=model,
            context_window=window,
            tools=tools,
            system_prompt="You are a careful coding agent. Explain decisions briefly.",
            auto_compact=False,
        )
        ingest.message_append(session=session, messages=[normalize_message(t) for t in turns])
        session.refresh_from_db()
        sessions.append(session)
    sessions.append(_nightly_session(user, project))
    sessions.append(_paused_session(user, project))
    _demo_webhook(user, project)
    _demo_requests(user, sessions)
    return DemoResult(DEMO_USER, DEMO_PASSWORD, project, sessions, True, user.is_staff)
