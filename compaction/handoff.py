"""The handoff document (docs/COMPACTION.md, "Handoff"): the state of a session, section by section, as
plain text, Markdown and JSON — what a fresh session needs to start where this one stopped."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .checkpoint import checkpoint_decisions
from .prose import quotes, render_prose

RULE = "=" * 40
SECTIONS = (
    "CURRENT TASK",
    "USER MESSAGES",
    "TODO LIST",
    "COMPLETED",
    "IN PROGRESS",
    "NEXT STEPS",
    "FILES MODIFIED",
    "BLOCKING ISSUES",
    "DECISIONS MADE",
    "CONTEXT FOR CONTINUATION",
)


@dataclass(frozen=True)
class HandoffContext:
    project: str
    session_id: int
    session_name: str
    model: str
    checkpoint_id: int
    checkpoint_version: int
    created_at: str
    base_url: str
    usage_percent: float
    recent_messages: tuple[str, ...] = ()


@dataclass(frozen=True)
class Handoff:
    text: str
    markdown: str
    data: dict[str, Any]


def _progress(checkpoint: dict[str, Any]) -> int:
    done = len(checkpoint.get("completed") or [])
    open_ = len(checkpoint.get("in_progress") or []) + len(checkpoint.get("pending") or [])
    return round(100 * done / (done + open_)) if done + open_ else 0


def _sections(checkpoint: dict[str, Any], ctx: HandoffContext) -> dict[str, list[str]]:
    """Section title → its lines, shared by the text and Markdown renderings."""
    objective = checkpoint.get("objective") or "(not recorded)"
    # The summarizer's decisions and those marked in the session (the facts), each once.
    decisions = [
        f"{d['decision']}: {d['rationale']}" if d["rationale"] else d["decision"]
        for d in checkpoint_decisions(checkpoint)
    ]
    files = [
        f"{f.get('path', '')}: {f['what']}" if f.get("what") else str(f.get("path", ""))
        for f in checkpoint.get("files_modified") or []
    ]
    # The facts ctxweb recorded verbatim (compaction/facts.py) complete what the summarizer wrote.
    facts = checkpoint.get("facts") or {}
    named = {str(f.get("path", "")) for f in checkpoint.get("files_modified") or []}
    files += [
        f"{f['path']} ({f.get('what') or 'modified'})"
        for f in facts.get("files_modified") or []
        if f["path"] not in named
    ]
    blockers = list(checkpoint.get("blockers") or [])
    for error in facts.get("errors") or []:
        blockers.append(
            f"{error.get('run', '')} failed:\n" + "\n".join(f"    {line}" for line in error.get("lines") or [])
        )
    cut = int(facts.get("user_messages_cut") or 0)
    said = [*(["(first request) " + facts["first_request"]] if facts.get("first_request") else [])]
    said += [*([f"({cut} older messages omitted)"] if cut else []), *(facts.get("user_messages") or [])]
    todos = [f"[{t.get('status', 'pending')}] {t.get('content', '')}" for t in facts.get("todos") or []]
    context = []
    prose = facts.get("recent_prose") or []
    work = str(facts.get("current_work") or "")
    if work and not quotes(prose, work):
        context.append(f"Current work (the newest assistant text): {work}")
    # The last things said, word for word, on lines of their own: what the agent goes on from.
    quoted = [str(facts.get("first_request") or ""), *(facts.get("user_messages") or [])]
    context += render_prose(prose, label="Last said before this handoff", quoted=quoted)
    if checkpoint.get("last_user_request"):
        context.append(f"Last user request (verbatim): {checkpoint['last_user_request']}")
    context.append(
        f"Session {ctx.session_id} ({ctx.session_name}) on {ctx.model} was at {ctx.usage_percent:.0f}% of its "
        "context window."
    )
    if checkpoint.get("important_details"):
        context.append("Details kept verbatim:")
        context.extend(f"  {d}" for d in checkpoint["important_details"])
    if facts.get("files_read"):
        context.append("Files read: " + ", ".join(facts["files_read"]))
    if facts.get("commands"):
        context.append("Commands run (last outcome):")
        context.extend(f"  {'ok' if c.get('ok') else 'FAILED'}: {c.get('command', '')}" for c in facts["commands"])
    if ctx.recent_messages:
        context.append("Most recent messages:")
        context.extend(f"  {m}" for m in ctx.recent_messages)
    return {
        "CURRENT TASK": [f"{objective} ({_progress(checkpoint)}% complete)"],
        "USER MESSAGES": said,
        "TODO LIST": todos,
        "COMPLETED": checkpoint.get("completed") or [],
        "IN PROGRESS": checkpoint.get("in_progress") or [],
        "NEXT STEPS": checkpoint.get("pending") or [],
        "FILES MODIFIED": files,
        "BLOCKING ISSUES": blockers,
        "DECISIONS MADE": decisions,
        "CONTEXT FOR CONTINUATION": context,
    }


def _resume_lines(ctx: HandoffContext) -> list[str]:
    return [
        f'Resume: POST {ctx.base_url}/api/v1/sessions/{ctx.session_id}/handoff/ with {{"continue": true}}',
        f"    or: python manage.py ctx handoff {ctx.session_id} --continue",
    ]


def render_handoff(checkpoint: dict[str, Any], ctx: HandoffContext) -> Handoff:
    sections = _sections(checkpoint, ctx)
    empty = {"BLOCKING ISSUES": "None blocking", "NEXT STEPS": "(none recorded)"}

    text = [
        RULE,
        f"HANDOFF DOCUMENT: {ctx.project}",
        f"Generated: {ctx.created_at}",
        f"Session: {ctx.session_id}",
        f"Checkpoint: {ctx.checkpoint_id} (version {ctx.checkpoint_version})",
        RULE,
    ]
    for title in SECTIONS:
        lines = sections[title]
        text += ["", f"## {title}"]
        if title == "NEXT STEPS":
            text += [f"{i}. {line}" for i, line in enumerate(lines, 1)] or [empty[title]]
        elif title in ("CURRENT TASK", "CONTEXT FOR CONTINUATION"):
            text += lines
        else:
            text += [f"- {line}" for line in lines] or [empty.get(title, "(none)")]
    text += ["", RULE, *_resume_lines(ctx), RULE]

    md = [
        f"# Handoff: {ctx.project}",
        "",
        f"*Generated {ctx.created_at} · session {ctx.session_id} · checkpoint {ctx.checkpoint_id} "
        f"(version {ctx.checkpoint_version})*",
    ]
    for title in SECTIONS:
        lines = sections[title]
        md += ["", f"## {title.title()}", ""]
        if title == "NEXT STEPS":
            md += [f"{i}. {line}" for i, line in enumerate(lines, 1)] or [f"_{empty[title]}_"]
        elif title in ("CURRENT TASK", "CONTEXT FOR CONTINUATION"):
            md += lines
        else:
            md += [f"- {line}" for line in lines] or [f"_{empty.get(title, '(none)')}_"]
    md += ["", "---", "", *(f"`{line.strip()}`  " for line in _resume_lines(ctx))]

    data = {
        "handoff": {**asdict(ctx), "recent_messages": list(ctx.recent_messages)},
        "progress_percent": _progress(checkpoint),
        "checkpoint": checkpoint,
        "sections": sections,
    }
    return Handoff(text="\n".join(text) + "\n", markdown="\n".join(md) + "\n", data=data)


def continuation_prompt(handoff: Handoff) -> str:
    """The first user message of the session that continues from a handoff."""
    return (
        "This session continues an earlier one that ran out of context. Its handoff document follows; "
        "treat it as the state of the work and continue from NEXT STEPS.\n\n" + handoff.text
    )
