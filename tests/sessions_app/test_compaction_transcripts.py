"""Compaction on every real transcript in ../shared/data, through the CLI as a user would run it.

Each main conversation is imported with ``--no-auto`` into a window that puts it at 90 %; then
``compact`` must keep every line a preserve pattern protects, ``summarize`` must bring usage below
50 %, and reverting both must give back exactly the context ``ctx context`` printed before.
"""

from __future__ import annotations

import io
import json
import math
import re
from typing import Any

import pytest
from django.core.management import call_command

from compaction.policy import DEFAULT_PRESERVE_PATTERNS, Policy
from sessions_app.models import CONTEXT_STATES, AgentSession, Message
from sessions_app.selectors.usage import session_status
from tests.shared_data import SHARED_DATA

pytestmark = [pytest.mark.django_db, pytest.mark.data]

FILES = sorted(
    [("claude-code", p) for p in (SHARED_DATA / "claude_code").glob("*.jsonl")]
    + [("openai", p) for p in (SHARED_DATA / "openai").glob("*") if not p.name.startswith("LICENSE")]
) or [("claude-code", SHARED_DATA / "shared-data-missing.jsonl")]  # the shared_data fixture says why
PATTERNS = [re.compile(p, re.IGNORECASE) for p in DEFAULT_PRESERVE_PATTERNS]
# Per-kind savings of `compact`, filled by the parametrized test and read by the summary test.
SAVINGS: dict[str, list[tuple[str, int, int]]] = {}
UNDER_HALF_IMPOSSIBLE: list[str] = []


def ctx(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("ctx", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def texts_of(context: dict[str, Any]) -> str:
    """Every string a model would read in the request's messages (JSON-decoded, so lines compare)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(context["messages"])
    return "\n".join(found)


def call_start(session: AgentSession, seq: int) -> int:
    """The earliest seq a tail starting at ``seq`` must reach back to so each result keeps its call."""
    rows = list(Message.objects.filter(session=session, state__in=CONTEXT_STATES).values_list("seq", "content"))
    call_at = {b["id"]: s for s, c in rows if isinstance(c, list) for b in c if b.get("type") == "tool_use"}
    start = seq
    while True:
        answered = {b.get("tool_use_id") for s, c in rows if s >= start and isinstance(c, list) for b in c}
        earlier = [call_at[i] for i in answered if i in call_at and call_at[i] < start]
        if not earlier:
            return start
        start = min(earlier)


def newest_turn_start(session: AgentSession) -> int:
    """The seq where the newest turn starts: the last user message, or the call its results answer
    (results of one call may span several messages)."""
    rows = list(Message.objects.filter(session=session).order_by("seq").values_list("seq", "role", "content"))

    def answers_a_call(content: Any) -> bool:
        return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)

    start = max(i for i, (_, role, _) in enumerate(rows) if role in ("user", "tool"))
    while start > 0 and answers_a_call(rows[start][2]):
        start -= 1
    return rows[start][0]


def request_of(context: dict[str, Any]) -> dict[str, Any]:
    """The request itself; STATUS may carry a warning about a compaction that failed meanwhile."""
    return {k: v for k, v in context.items() if k != "status"}


def preserved_lines(text: str) -> set[str]:
    return {line for line in text.splitlines() if line.strip() and any(p.search(line) for p in PATTERNS)}


def kind_of(path) -> str:
    return "swe-agent" if "swe-agent" in path.name else "tau-bench" if "tau-bench" in path.name else "claude-code"


def import_at_90_percent(fmt: str, path, project: int) -> AgentSession:
    result = ctx("import", str(path), "--format", fmt, "--project", str(project), "--no-auto")
    # The compaction's figures are ctxweb's estimates: STATUS is compared as one too (not the count
    # of a transcript's last response).
    AgentSession.objects.filter(pk=result["session"]).update(exact_upto_seq=None)
    session = AgentSession.objects.get(pk=result["session"])
    window = math.ceil(session_status(session)["used"] / 0.9)
    AgentSession.objects.filter(pk=session.pk).update(context_window_override=window)
    return session


@pytest.mark.parametrize(("fmt", "path"), FILES, ids=[p.name for _, p in FILES])
def test_compact_summarize_and_revert_on_a_real_transcript(shared_data, team, fmt, path):
    session = import_at_90_percent(fmt, path, team.project.pk)
    sid = str(session.pk)
    before = ctx("context", sid)
    assert 89 <= before["status"]["usage_percent"] <= 91
    original_lines = preserved_lines(texts_of(before))

    compacted = ctx("compact", sid, "--level", "compact")
    after_compact = ctx("context", sid)
    kept = texts_of(after_compact)
    lost = [line for line in original_lines if line not in kept]
    assert not lost, f"preserve-pattern lines lost: {lost[:3]}"
    if compacted["status"] == "succeeded":
        messages_before = before["status"]["messages"]
        saved = messages_before - after_compact["status"]["messages"]
        # The record calibrates the whole context, STATUS each part: once a summary is in the context
        # (a file with Claude Code's own compaction), the two may round a token apart.
        assert abs(saved - compacted["saved_tokens"]) <= 1 and compacted["saved_tokens"] > 0
    else:
        assert compacted["status"] == "skipped" and after_compact == before
        saved = 0
    SAVINGS.setdefault(kind_of(path), []).append((path.name, saved, before["status"]["messages"]))

    summarized = ctx("compact", sid, "--level", "summarize")
    no_summary = [n for n in summarized["notes"] if "Nothing to summarize" in n or "would not be smaller" in n]
    if no_summary:
        # Too short to split, or a summary would not be smaller: it says so and writes no checkpoint.
        assert summarized["status"] in ("succeeded", "skipped") and not summarized["error"].startswith("internal")
        assert ctx("status", sid)["summary"] == 0
    else:
        assert summarized["status"] == "succeeded", summarized
        usage = ctx("status", sid)["usage_percent"]
        if usage > 100 * Policy().target_after + 0.5:
            # Only when the protected messages (the newest three or more, the newest turn) alone
            # leave no room: then nothing older than them and the calls they answer is left.
            kept = Message.objects.filter(session=session, state__in=CONTEXT_STATES).order_by("seq")
            seqs = list(kept.values_list("seq", flat=True))
            roles = list(kept.values_list("role", flat=True))
            protected = min(newest_turn_start(session), seqs[-min(len(seqs), Policy().protected_count(roles))])
            assert kept.first().seq >= call_start(session, protected), f"{usage}% and an older message kept"
            UNDER_HALF_IMPOSSIBLE.append(path.name)
    if summarized["status"] == "succeeded":
        ctx("compact", sid, "--revert")
    else:
        assert request_of(ctx("context", sid)) == request_of(after_compact)
    if compacted["status"] == "succeeded":
        ctx("compact", sid, "--revert")
    restored = ctx("context", sid)
    assert request_of(restored) == request_of(before)
    assert restored["status"]["used"] == before["status"]["used"]


def test_compact_saves_thirty_percent_on_agent_sessions(shared_data):
    """Seed 000's target (≥ 30 % of message tokens) on the Claude Code sessions taken together and
    on the SWE-agent one; tau-bench's figure is reported. Runs after the parametrized test."""
    if not SAVINGS:
        pytest.skip("run together with test_compact_summarize_and_revert_on_a_real_transcript")
    report = {
        kind: sum(saved for _, saved, _ in rows) / sum(total for _, _, total in rows) for kind, rows in SAVINGS.items()
    }
    print("share of message tokens saved by compact:", {k: f"{v:.1%}" for k, v in report.items()})
    print("summarize left above 50 % (the newest turn alone is that big):", UNDER_HALF_IMPOSSIBLE)
    assert report["claude-code"] >= 0.30
    assert report["swe-agent"] >= 0.30
