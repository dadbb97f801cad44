"""Secrets out of what ctxweb stores, before the first write: every way a message comes in ends in
``ingest.message_append`` (or rewrites a stored one), which redacts it here with its project's rules
(``compaction.redact``); the session's system prompt and tools, likewise. The session keeps an audit
of what was replaced: kind -> count, never a value."""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import replace
from typing import Any

from compaction import redact
from compaction.messages import NormalizedMessage
from sessions_app.engine import redaction_rules
from sessions_app.errors import InvalidInput
from sessions_app.models import AgentSession, Project
from sessions_app.selectors.usage import project_engine_policy


def project_rules(project: Project) -> redact.Rules:
    policy = project_engine_policy(project)
    return redaction_rules(policy.redact_off, policy.redact_patterns)


def messages_redact(
    project: Project, messages: list[NormalizedMessage]
) -> tuple[list[NormalizedMessage], list[Counter[str]]]:
    """The messages with their secrets replaced (content and metadata), and what each lost."""
    rules = project_rules(project)
    done, found = [], []
    for message in messages:
        if message.client_id:
            _identifier_check(message.client_id, rules, "client_id")
        content = redact.redact(message.content, rules)
        metadata = redact.redact(message.metadata, rules)
        found.append(content.found + metadata.found)
        if content.found or metadata.found:
            message = replace(message, content=content.value, metadata=metadata.value)
        done.append(message)
    return done, found


def message_redact(project: Project, message: NormalizedMessage) -> NormalizedMessage:
    """One message with its secrets replaced (what a rewrite of a stored message stores)."""
    return messages_redact(project, [message])[0][0]


def markers_added(before: Any, after: Any) -> Counter[str]:
    """The markers ``after`` holds beyond ``before``'s, by kind: what a rewrite adds to the audit."""
    return _markers(after) - _markers(before)


def _markers(value: Any) -> Counter[str]:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return Counter(m.group(1) for m in _MARKER_KIND.finditer(text))


_MARKER_KIND = re.compile(r"\[secret:([a-z0-9-]{1,40}):[0-9a-f]{4}\]")


def value_redact(project: Project, value: Any) -> redact.Redacted:
    """A system prompt, a tool list, a line's text: with its secrets replaced."""
    return redact.redact(value, project_rules(project))


def redactions_add(locked: AgentSession, found: Counter[str]) -> list[str]:
    """Add to the session's audit (inside the caller's transaction, the session locked); the fields
    to save, empty when nothing was found."""
    if not found:
        return []
    audit = Counter(locked.redactions or {})
    audit.update(found)
    locked.redactions = dict(sorted(audit.items()))
    return ["redactions"]


def identifier_check(project: Project, value: str, field: str) -> None:
    """An id the client matches on (a session's external id, a message's client id) is stored and
    looked up as it is, so one holding a secret is refused rather than stored or rewritten."""
    if value:
        _identifier_check(value, project_rules(project), field)


def _identifier_check(value: str, rules: redact.Rules, field: str) -> None:
    kinds = sorted(redact.redact(value, rules).found)  # what storing it would replace
    if kinds:
        raise InvalidInput(
            f"{field} holds what looks like a secret ({', '.join(kinds)}); use an id that is not one.",
            code="secret_in_identifier",
            field=field,
        )


def project_text_redact(project: Project | None, text: str) -> str:
    """A text a team writes for a project (its context document): by the project's rules, or the
    built-in ones for a project not saved yet."""
    if project is None:
        return public_text(text)
    return str(value_redact(project, text).value)


def public_text(text: str) -> str:
    """A text going back out where no project is known (an error's detail): the built-in rules."""
    return str(redact.redact(text, redaction_rules((), ())).value)
