"""``ctx status`` without a session: a project at a glance, as the top of its dashboard has it —
its active sessions by level and those closest to their window."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compaction.usage import glyph_bar
from sessions_app.models import Project
from sessions_app.selectors.dashboard import SessionUse, session_use_payload


def overview_payload(project: Project, levels: dict[str, int], closest: list[SessionUse]) -> dict[str, Any]:
    return {
        "project": project.pk,
        "name": project.name,
        "sessions": sum(levels.values()),
        "levels": levels,
        "closest": [session_use_payload(u) for u in closest],
    }


def render_overview(
    project: Project, levels: dict[str, int], closest: list[SessionUse], *, paint: Callable[[str], str] = str
) -> str:
    active = sum(levels.values())
    rows = [f"Project {project.pk} · {project.name}: {active} active session{'' if active == 1 else 's'}", ""]
    width = max(len(level) for level in levels)
    # The padding sits outside the paint, so colour codes never shift the columns.
    rows += [f"  {paint(level)}{' ' * (width - len(level))}  {n:>5}" for level, n in levels.items()]
    if not closest:
        return "\n".join([*rows, "", "No active session has used any of its window yet."])
    rows += ["", "Closest to their window:"]
    for use in closest:
        pad = " " * (width - len(use.level))
        rows.append(
            f"  {glyph_bar(use.usage_percent / 100)}  {use.usage_percent:>4.0f}%  {paint(use.level)}{pad}  "
            f"{use.session.pk:>5}  {use.session.name}"
        )
    return "\n".join(rows)
