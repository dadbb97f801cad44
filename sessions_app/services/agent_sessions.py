"""Sessions created, edited and deleted, and the checks their text fields and tool schemas pass first
(what the database can hold, what Anthropic would refuse)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction

from compaction import jsonvalues
from sessions_app.engine import offline_tokenizer
from sessions_app.errors import Conflict, InvalidInput
from sessions_app.models import (
    SIDECHAIN_OF,
    AgentSession,
    Project,
)
from sessions_app.selectors import usage
from sessions_app.services import redaction, spend_rollup
from sessions_app.services.webhook_events import session_level_record

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

# The columns' sizes; longer values are refused here rather than by the database.
SESSION_TEXT_LIMITS = {"name": 200, "model": 100, "external_id": 200}


def fit(text: str, limit: int, *, project: Project | None = None) -> str:
    """``text`` cut to ``limit`` characters (with an ellipsis) and made storable: for names the
    server makes up (from a recorded file, for a continuation) rather than refuses. Given the project,
    redacted first: a secret cut short would no longer be found whole."""
    text = jsonvalues.clean_text(text)
    if project is not None:
        text = redaction.value_redact(project, text).value
    if len(text) <= limit:
        return text
    cut = limit - 1
    opened = text.rfind("[secret:", max(0, cut - 60), cut)
    if opened >= 0 and text.find("]", opened) >= cut:  # not in the middle of a marker
        cut = opened
    return text[:cut] + "…"


def check_text(value: Any, field: str, *, limit: int | None = None, nul: bool = True) -> None:
    """A string the database can hold: within ``limit`` characters, no NUL (unless ``nul`` is False),
    no lone surrogate. Raises InvalidInput naming the field."""
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string.", code="invalid", field=field)
    if limit is not None and len(value) > limit:
        raise InvalidInput(
            f"{field} is {len(value):,} characters long; at most {limit:,} are allowed.", code="too_long", field=field
        )
    if nul and "\x00" in value:
        raise InvalidInput(f"{field} must not contain NUL characters.", code="null_characters_not_allowed", field=field)
    if jsonvalues.has_lone_surrogate(value):
        raise InvalidInput(f"{field} holds a lone UTF-16 surrogate.", code="invalid_unicode", field=field)


def _check_session_fields(fields: dict[str, Any]) -> None:
    for field, value in fields.items():
        if field in SESSION_TEXT_LIMITS or field == "system_prompt":
            check_text(value, field, limit=SESSION_TEXT_LIMITS.get(field))
    if "model" in fields and not fields["model"].strip():
        raise InvalidInput("model must name a model.", code="invalid_model", field="model")


def validate_tools(tools: Any) -> list[dict[str, Any]]:
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise InvalidInput("tools must be a list of tool schemas.", code="invalid_tools", field="tools")
    unstorable = jsonvalues.problem(tools, where="tools")
    if unstorable is not None:
        raise InvalidInput(unstorable[1] + ".", code=unstorable[0], field="tools")
    if jsonvalues.holds_nul(tools):
        raise InvalidInput("tools must not contain NUL characters.", code="null_characters_not_allowed", field="tools")
    names: set[str] = set()
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise InvalidInput(
                f"tools[{i}] must be an object with a string 'name'.", code="invalid_tools", field="tools"
            )
        schema = tool.get("input_schema", tool.get("parameters"))
        if schema is not None and not isinstance(schema, dict):
            raise InvalidInput(
                f"tools[{i}].input_schema must be a JSON schema object.", code="invalid_tools", field="tools"
            )
        if tool["name"] in names:
            raise InvalidInput(
                f"tools[{i}]: the name {tool['name']!r} is used twice.", code="invalid_tools", field="tools"
            )
        names.add(tool["name"])
    return tools


def spawner_id(project: Project, named: Any) -> int | None:
    """The session a sub-agent's metadata names (``SIDECHAIN_OF``) as its ``spawned_by``, when it is
    one of the same project's."""
    if not isinstance(named, int) or isinstance(named, bool):
        return None
    return named if AgentSession.objects.filter(pk=named, project=project).exists() else None


def session_create(
    *,
    user: User | None,
    project: Project,
    name: str = "",
    model: str = "claude-sonnet-4-5",
    system_prompt: str = "",
    tools: list[dict[str, Any]] | None = None,
    external_id: str = "",
    context_window: int | None = None,
    auto_compact: bool | None = None,
    parent: AgentSession | None = None,
    metadata: dict[str, Any] | None = None,
) -> AgentSession:
    tools = validate_tools(tools)
    _check_session_fields(
        {"name": name, "model": model, "external_id": external_id or "", "system_prompt": system_prompt or ""}
    )
    redaction.identifier_check(project, external_id or "", "external_id")
    redacted = redaction.value_redact(
        project,
        {
            "name": name,
            "model": model,
            "system_prompt": system_prompt or "",
            "tools": tools,
            "metadata": metadata or {},
        },
    )
    name, model, system_prompt, tools, metadata = (
        redacted.value[k] for k in ("name", "model", "system_prompt", "tools", "metadata")
    )
    # A marker may be longer than the secret it stands for: the column's size holds after it.
    name, model = fit(name, SESSION_TEXT_LIMITS["name"]), fit(model, SESSION_TEXT_LIMITS["model"])
    tokenizer = offline_tokenizer()
    session = AgentSession(
        project=project,
        owner=user,
        name=name,
        external_id=external_id or "",
        model=model,
        context_window_override=context_window,
        system_prompt=system_prompt or "",
        tools=tools,
        auto_compact=auto_compact,
        parent=parent,
        spawned_by_id=spawner_id(project, (metadata or {}).get(SIDECHAIN_OF)),
        metadata=metadata or {},
        redactions=dict(sorted(redacted.found.items())),
        system_tokens=tokenizer.count_system(system_prompt),
        tool_tokens=tokenizer.count_tools(tools),
    )
    current = usage.session_usage(session)  # stored from the start: lists filter on it
    session.level, session.usage_percent = current.level.value, current.usage_percent
    try:
        with transaction.atomic():
            session.save()
    except IntegrityError:
        raise Conflict(
            f"This project already has a session with external_id {external_id!r}.",
            code="duplicate_external_id",
            field="external_id",
        ) from None
    return session


SESSION_EDITABLE = ("name", "model", "system_prompt", "tools", "context_window_override", "auto_compact", "status")


def session_update(*, session: AgentSession, **changes: Any) -> AgentSession:
    unknown = set(changes) - set(SESSION_EDITABLE)
    if unknown:
        raise InvalidInput(f"Can't change {', '.join(sorted(unknown))}.", code="read_only")
    _check_session_fields({k: ("" if k == "system_prompt" and v is None else v) for k, v in changes.items()})
    tokenizer = offline_tokenizer()
    texts = {k: v for k, v in changes.items() if k in ("name", "model", "system_prompt", "tools") and v is not None}
    changes.update(redaction.value_redact(session.project, texts).value)
    for key in ("name", "model"):
        if key in texts:
            changes[key] = fit(changes[key], SESSION_TEXT_LIMITS[key])
    with transaction.atomic():
        locked = AgentSession.objects.select_for_update().get(pk=session.pk)
        fields = redaction.redactions_add(
            locked, redaction.markers_added([getattr(locked, k) for k in texts], [changes[k] for k in texts])
        )
        for key, value in changes.items():
            if key == "tools":
                value = validate_tools(value)
                locked.tool_tokens = tokenizer.count_tools(value)
                fields.append("tool_tokens")
            if key == "system_prompt":
                value = value or ""
                locked.system_tokens = tokenizer.count_system(value)
                fields.append("system_tokens")
            setattr(locked, key, value)
            fields.append(key)
        if {"tools", "system_prompt", "model"} & set(changes):
            locked.exact_tokens = None  # the exact count described another request
            fields.append("exact_tokens")
        if "model" in changes and locked.context_window_learnt is not None:
            locked.context_window_learnt = None  # the provider taught it another model's window
            fields.append("context_window_learnt")
        locked.save(update_fields=[*fields, "updated_at"])
        session_level_record(locked)  # a model, a window, a prompt or tools move its usage
    return locked


def session_window_learn(*, session: AgentSession, window: int | None) -> AgentSession:
    """The window the provider showed the session's model has (None: its model's again), in place of
    the model's: a refusal as too long names a smaller one, a request answered with more input than
    the one learnt shows a larger one. The session's own override, when set, still wins."""
    with transaction.atomic():
        locked = AgentSession.objects.select_for_update().get(pk=session.pk)
        if locked.context_window_learnt != window:
            locked.context_window_learnt = window
            locked.save(update_fields=["context_window_learnt", "updated_at"])
            session_level_record(locked)
    return locked


def session_delete(*, session: AgentSession) -> None:
    """The session and everything of it; its provider requests' figures leave the project's rollup."""
    with transaction.atomic():
        locked = AgentSession.objects.select_for_update().get(pk=session.pk)
        spend_rollup.session_rollup_remove(locked)
        locked.delete()
