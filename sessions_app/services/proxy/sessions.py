"""Which session a proxied request is recorded in (``proxy_session_for``: the first step of every
exchange, before anything is forwarded).

Which session: the ``ctxweb-session`` header (an external id of the caller's choosing), else the
agent's own session id (Claude Code's ``metadata.user_id``, OpenCode's ``x-session-id``): its main
conversation is the session with that id (the one Claude Code's hook uploads to), its subagents and
side requests sessions of their own linked to it; else a hash of the conversation's start (system
prompt and first message). So one conversation is one session however many requests it takes,
whatever form a client gives it from one request to the next (``identity``). A closed session
(archived, handed off), or a history that no longer starts with what is stored (the agent edited
its own), continues in a fresh session linked to the old one (``recording``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.db import transaction

from compaction import model_catalog
from sessions_app.errors import Conflict, InvalidInput
from sessions_app.models import (
    SIDECHAIN_OF,
    AgentSession,
    Project,
    SessionStatus,
)
from sessions_app.selectors import session_rows
from sessions_app.services import (
    agent_sessions,
)
from sessions_app.services.proxy.identity import (
    EXTERNAL_ID_MAX,
    session_name,
    system_text,
)
from sessions_app.services.proxy.messages import (
    as_list,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

log = logging.getLogger(__name__)


# Anthropic's beta that gives a model its 1M-token window (``context-1m-2025-08-07``), in the
# comma-separated ``anthropic-beta`` header.
LONG_CONTEXT_BETA = "context-1m-"


def long_context_beta(header: str) -> bool:
    return any(beta.strip().startswith(LONG_CONTEXT_BETA) for beta in header.split(","))


def proxy_session_for(
    *,
    user: User,
    project: Project,
    key: str,
    body: dict[str, Any],
    agent: tuple[str, str] | None = None,
    long_context: bool = False,
) -> AgentSession:
    """The session of conversation ``key`` in ``project``, made on its first request (with the
    request's model, system prompt and tools); a closed one (archived, handed off) is continued in a
    fresh session. ``agent``: the agent's own session id and the request's prompt hash
    (``proxy_identity.agent_conversation``), when the request names them: the agent's main
    conversation is then the session with that id, its others are linked to it (``spawned_by``). A
    caller records into the session's external id (it may not be ``key``). ``long_context``: the
    request asks for the model's 1M-token window (``long_context_beta``); the session's model is then
    named as Claude Code names it, ``…[1m]``."""
    if long_context:
        body = {**body, "model": _long(_model(body))}
    metadata: dict[str, Any] = {"source": "proxy"}
    asked = key
    if agent is not None:
        key, main = _agent_conversation(project, key, body, agent)
        if key == agent[0]:
            metadata["prompt"] = agent[1]
        elif main is not None:  # linked as import links a sub-agent's session to its conversation's
            metadata[SIDECHAIN_OF] = main.pk
    found = conversation_session(project, key)
    if found is not None and long_context and found.model == model_catalog.without_long_context(_model(body)):
        found = agent_sessions.session_update(session=found, model=_model(body))  # the beta from now on
    if found is not None:
        return found if found.status == SessionStatus.ACTIVE else continue_in_fresh_session(found, body, key)
    try:
        created = _session_created(
            body, user=user, project=project, name=session_name(body, project), model=_model(body), external_id=key,
            metadata=metadata,
        )  # fmt: skip
    except Conflict as exc:
        found = conversation_session(project, key)  # another request of the conversation made it first
        if exc.code != "duplicate_external_id" or found is None:
            raise
        if agent is not None and key == agent[0] and found.metadata.get("prompt") != agent[1]:
            return proxy_session_for(user=user, project=project, key=asked, body=body, agent=agent)  # not ours: a child
        return found
    if agent is not None and key == agent[0]:
        _sides_linked(created, agent[0])
    elif (
        agent is not None
        and SIDECHAIN_OF not in metadata
        and (main := conversation_session(project, agent[0])) is not None
    ):
        _sides_linked(main, agent[0])  # made meanwhile (OpenCode sends its title alongside): one of the two links
    return created


def _sides_linked(main: AgentSession, agent: str) -> None:
    """Side requests the agent sent before its main conversation's first (a title, alongside it)
    made sessions of their own: linked to the main one now."""
    sides = AgentSession.objects.filter(project_id=main.project_id, external_id__startswith=f"{agent}#")
    for pk, metadata in sides.values_list("pk", "metadata"):
        if SIDECHAIN_OF not in metadata:
            AgentSession.objects.filter(pk=pk).update(metadata={**metadata, SIDECHAIN_OF: main.pk}, spawned_by=main)


def _agent_conversation(
    project: Project, key: str, body: dict[str, Any], agent: tuple[str, str]
) -> tuple[str, AgentSession | None]:
    """Which of an agent's conversations a request is: the main one (keyed by the agent's session id,
    as the session its hook records is) when it has that session's prompt, or when no session has
    the id yet and the request offers tools (a side request, a title, offers none); else one of its
    others, keyed ``key``, linked to the main session (returned with it). A session the hook made
    with that id and stored nothing in yet is taken over (the hook's uploads then add nothing to it:
    ``services.transcript_sync``); one the hook already records is the main one of the proxy's."""
    main, prompt = agent
    owner = conversation_session(project, main)
    if owner is None:
        return (main, None) if as_list(body.get("tools")) else (key, None)
    if owner.metadata.get("prompt") == prompt or _taken_over(owner, prompt):
        return main, None
    return key, owner


def _taken_over(session: AgentSession, prompt: str) -> bool:
    if "prompt" in session.metadata or session.last_seq:
        return False
    with transaction.atomic():
        locked = AgentSession.objects.select_for_update().filter(pk=session.pk, last_seq=0).first()
        if locked is None or "prompt" in locked.metadata:
            return False
        locked.metadata = {**locked.metadata, "source": "proxy", "prompt": prompt}
        AgentSession.objects.filter(pk=locked.pk).update(metadata=locked.metadata)
    session.metadata = locked.metadata
    return True


def proxy_session(session_id: int) -> AgentSession | None:
    return session_rows.session_where("s.id = %s", [session_id])


def continue_in_fresh_session(session: AgentSession, body: dict[str, Any], key: str) -> AgentSession:
    """A fresh session for conversation ``key``, linked to ``session``, that the request's whole
    history goes into; the session that held the key keeps its messages under a retired external id.
    When another request of the conversation made it first, that one."""
    with transaction.atomic():
        if session.external_id == key:
            retired = f"{key[: EXTERNAL_ID_MAX - 24]}@{session.pk}"
            AgentSession.objects.filter(pk=session.pk, external_id=key).update(external_id=retired)
        try:
            return _session_created(
                body, user=session.owner, project=session.project, name=session.name, model=_model(body),
                external_id=key, parent=session, metadata=_continuing(session),
            )  # fmt: skip
        except Conflict as exc:
            found = conversation_session(session.project, key)
            if found is None or exc.code != "duplicate_external_id":
                raise
            return found


def _session_created(body: dict[str, Any], **fields: Any) -> AgentSession:
    """A session with the request's system prompt and tools; without the one it can't hold (a tool
    with no name, a prompt with a NUL) rather than no session."""
    given: dict[str, Any] = {"system_prompt": system_text(body.get("system")), "tools": as_list(body.get("tools"))}
    while True:
        try:  # refused before anything is written; no transaction of its own: the session is committed at once
            return agent_sessions.session_create(**fields, **given)
        except InvalidInput as exc:
            if not given:
                raise
            given.pop(exc.field if exc.field in given else next(iter(given)))


def _continuing(session: AgentSession) -> dict[str, Any]:
    kept = {k: session.metadata[k] for k in ("prompt", SIDECHAIN_OF) if k in session.metadata}
    return {"source": "proxy", "continues": session.pk, **kept}


def conversation_session(project: Project, key: str) -> AgentSession | None:
    return session_rows.session_where("s.project_id = %s AND s.external_id = %s", [project.pk, key])


def _long(model: str) -> str:
    longer = model + model_catalog.LONG_CONTEXT_SUFFIX
    too_long = len(longer) > agent_sessions.SESSION_TEXT_LIMITS["model"]
    return model if model == "unknown" or model_catalog.long_context_asked(model) or too_long else longer


def _model(body: dict[str, Any]) -> str:
    """The request's model as a session's: "unknown" when it names none a session can hold."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        return "unknown"
    model = model.strip()[: agent_sessions.SESSION_TEXT_LIMITS["model"]]
    try:
        agent_sessions.check_text(model, "model", limit=agent_sessions.SESSION_TEXT_LIMITS["model"])
    except InvalidInput:  # a NUL, a lone surrogate
        return "unknown"
    return model
