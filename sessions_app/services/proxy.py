"""What the Anthropic-compatible proxy records (``api/proxy_views`` forwards; this stores).

An agent that points its base URL at ctxweb resends its whole history with every request. Each
request appends only what is new since the session's last stored message; the model's reply is
appended when its response (or stream) ends; the response's ``usage`` becomes the session's exact
count and teaches the model's calibration. Nothing here talks to Anthropic, and the caller's API key
never reaches this module.

Which session: the ``ctxweb-session`` header (an external id of the caller's choosing), else the
request's ``metadata.user_id`` (Claude Code puts its own session id there) with a hash of the system
prompt (the agent's subagents and side requests share its id), else a hash of the conversation's
start (system prompt and first message), so one conversation is one session however many requests it
takes, whatever form a client gives it from one request to the next (``services.proxy_identity``). A
history that no longer starts with what is stored (the agent compacted or edited its own) continues in
a fresh session linked to the old one. What goes upstream for ``proxy_compaction`` is
``services.proxy_upstream``; requests missed while the database was down, ``services.proxy_gaps``.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from django.db import transaction
from django.db.models import QuerySet

from compaction.messages import MessageError, NormalizedMessage, normalize_message
from compaction.reversible import message_text
from compaction.tokens import DEFAULT_FRAMING
from sessions_app.errors import Conflict, InvalidInput
from sessions_app.models import (
    AgentSession,
    IngestRejection,
    Message,
    Project,
    SessionStatus,
)
from sessions_app.services import (
    agent_sessions,
    boundaries,
    ingest,
    provider_edits,
    proxy_gaps,
    recorded,
)
from sessions_app.services.proxy_identity import (
    EXTERNAL_ID_MAX,
    continues_after_compaction,
    session_name,
    system_text,
)
from sessions_app.services.proxy_messages import (
    REPLY_PREFIX,
    as_dict,
    as_list,
    client_id,
    cut_reply_completed,
    exact_from_usage,
    normalized,
    provider_compactions,
    replies_as_the_agent_kept_them,
    reply_message,
)

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recorded:
    session: AgentSession
    appended: int  # messages of the request stored now (0: nothing new)
    rejected: str = ""  # why the request's new messages could not be stored ("" when they were)
    reply: Message | None = None  # the reply, when it was stored with them (in the same append)


def proxy_session_for(
    *, user: User, project: Project, key: str, body: dict[str, Any], agent: tuple[str, str] | None = None
) -> AgentSession:
    """The session of conversation ``key`` in ``project``, made on its first request (with the
    request's model, system prompt and tools); a closed one (archived, handed off) is continued in a
    fresh session. ``agent``: the agent's own session id and the request's prompt hash
    (``proxy_identity.agent_conversation``), when the request names them: the agent's main
    conversation is then the session with that id, its others are linked to it (``sidechain_of``). A
    caller records into the session's external id (it may not be ``key``)."""
    metadata: dict[str, Any] = {"source": "proxy"}
    asked = key
    if agent is not None:
        key, main = _agent_conversation(project, key, body, agent)
        if key == agent[0]:
            metadata["prompt"] = agent[1]
        elif main is not None:  # linked as import links a sub-agent's session to its conversation's
            metadata[SIDECHAIN_OF] = main.pk
    found = _current(project, key)
    if found is not None:
        return found if found.status == SessionStatus.ACTIVE else _continue_in_fresh_session(found, body, key)
    name, model = session_name(body), _model(body)
    try:
        try:
            created = agent_sessions.session_create(
                user=user,
                project=project,
                name=name,
                model=model,
                external_id=key,
                system_prompt=system_text(body.get("system")),
                tools=as_list(body.get("tools")),
                metadata=metadata,
            )
        except InvalidInput:  # tools or a prompt the session can't hold: recorded without them
            created = agent_sessions.session_create(
                user=user, project=project, name=name, model=model, external_id=key, metadata=metadata
            )
    except Conflict as exc:
        found = _current(project, key)  # another request of the conversation made it first
        if exc.code != "duplicate_external_id" or found is None:
            raise
        if agent is not None and key == agent[0] and found.metadata.get("prompt") != agent[1]:
            return proxy_session_for(user=user, project=project, key=asked, body=body, agent=agent)  # not ours: a child
        return found
    if agent is not None and key == agent[0]:
        _sides_linked(created, agent[0])
    return created


def _sides_linked(main: AgentSession, agent: str) -> None:
    """Side requests the agent sent before its main conversation's first (a title, alongside it)
    made sessions of their own: linked to the main one now."""
    sides = AgentSession.objects.filter(project_id=main.project_id, external_id__startswith=f"{agent}#")
    for pk, metadata in sides.values_list("pk", "metadata"):
        if SIDECHAIN_OF not in metadata:
            AgentSession.objects.filter(pk=pk).update(metadata={**metadata, SIDECHAIN_OF: main.pk})


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
    owner = _current(project, main)
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
    return _sessions().filter(pk=session_id).first()


def proxy_record_request(
    *, session: AgentSession, body: dict[str, Any], key: str, reply: NormalizedMessage | None = None
) -> Recorded:
    """Append what the request holds beyond the session's stored messages, and ``reply`` (the model's
    answer to it) after them in the same append when they end the session. ``key``: the request's
    conversation. A request whose history no longer starts with the stored messages, or whose
    session was closed (archived, handed off), continues in a fresh session linked to this one.

    Several processes record a conversation's exchanges at once, in any order: the new messages go
    in only where the session was seen to end (``after_seq``), and a recording that stored there
    first sends this one back to be placed again, so nothing is stored twice or out of its place."""
    messages = as_list(body.get("messages"))
    for _ in range(_PLACINGS):
        placed = _place(session, messages, key, body)
        if placed is None:
            return Recorded(session, 0, _CHANGED)
        if placed.behind:
            return Recorded(placed.session, 0, _BEHIND)
        try:
            return _append_new(placed, messages, reply)
        except Conflict:  # another recording stored first, or the session was closed: placed as it is now
            session = proxy_session(placed.session.pk) or placed.session
    log.warning("proxy: session %s: the request was not recorded: the session kept moving on", session.pk)
    return Recorded(session, 0, _CHANGED)


_CHANGED = "the conversation changed while it was recorded"
_BEHIND = "the request came before the client compacted its history: what it holds has no place after that"
# Another conversation of the same agent session (a subagent, a side request): the session of the
# main one, as ``ctx import`` and the hook link a sub-agent's (``parent`` is what a session continues).
SIDECHAIN_OF = "sidechain_of"
# The seq before a request's first message: 0, until the client compacts its own history (``_rebased``).
BASE = "proxy_base"
IS_COMPACT_SUMMARY = "is_compact_summary"  # as ``ctx import`` flags Claude Code's summary
# Each new placing follows another recording's append (or the session's closing), and a conversation
# has a few exchanges in flight at most: this many is never reached but in a fault.
_PLACINGS = 20


def _append_new(placed: Placed, messages: list[Any], reply: NormalizedMessage | None) -> Recorded:
    session, start, base = placed.session, placed.start, placed.base
    replies_as_the_agent_kept_them(session, placed.replies, messages, base=base)
    fresh = messages[start:]
    with_reply = reply is not None and base + start == session.last_seq  # not for a request behind what is stored
    if not fresh and not with_reply:
        return Recorded(session, 0)
    try:
        batch = [_normalized_at(m, start + i, base) for i, m in enumerate(fresh)]
        if with_reply and reply is not None:
            batch.append(reply)
        result = ingest.message_append(session=session, messages=batch, after_seq=base + start)
    except (MessageError, InvalidInput):
        if with_reply:  # maybe the reply (a tool id the session holds already): the agent's copy comes next time
            return _append_new(placed, messages, None)
        return _append_one_by_one(session, start, messages, base)
    # A reply that carried a provider's compaction and was not recorded from its response (ctxweb was
    # down then) arrives here, with the agent's history; a history the client compacted, here too.
    provider_compactions(result.session, result.messages)
    if start == 0 and base and batch and batch[0].metadata.get(IS_COMPACT_SUMMARY):
        _client_compaction(result.session, batch[0])
    stored_reply = result.messages[-1] if with_reply else None
    return Recorded(result.session, result.created - (stored_reply is not None), reply=stored_reply)


class Placed(NamedTuple):
    session: AgentSession  # where the request's messages go
    start: int  # the first of them not stored yet
    replies: dict[int, Any]  # the stored replies read from responses where the histories meet: position → content
    base: int = 0  # the seq before the request's first message (``proxy_base``)
    behind: bool = False  # a request from before the client's last compaction: nothing of it is new


def _place(session: AgentSession, messages: list[Any], key: str, body: dict[str, Any]) -> Placed | None:
    """The session the request's messages go into and where its new ones start: this one, if its
    stored history is the request's; else the conversation's current session (it may have moved on to
    a fresh one since this was looked up), if that one's is; else a fresh session continuing it.
    None when even the fresh one holds another history (two rewrites at once)."""
    if session.status == SessionStatus.ACTIVE and (placed := _new_from(session, messages)) is not None:
        return placed
    current = _current(session.project, key)
    movable = current is not None and current.pk != session.pk and current.status == SessionStatus.ACTIVE
    if movable and current is not None and (placed := _new_from(current, messages)) is not None:
        return placed
    target = current if movable and current is not None else session
    if target.status == SessionStatus.ACTIVE and (placed := _behind_a_compaction(target, messages)) is not None:
        return placed
    if target.status == SessionStatus.ACTIVE and continues_after_compaction(messages):
        return _rebased(target, messages)
    return _new_from(_continue_in_fresh_session(current or session, body, key), messages)


def _behind_a_compaction(session: AgentSession, messages: list[Any]) -> Placed | None:
    """The request came before the client's last compaction of its history and is recorded after it
    (late, by another process, or again): its last message is stored before ``proxy_base``, with the
    one before it, at the places the request gives them. Nothing of it is new: what it holds beyond
    what was stored then has no place after the compaction."""
    base = _base(session)
    if not base or not messages:
        return None
    said = client_id(0, messages[-1]).split("-", 2)[2]  # the hash of what the last message says
    rows = Message.objects.filter(session=session, seq__lte=base, client_id__endswith=f"-{said}")
    for seq, stored_id in rows.values_list("seq", "client_id"):
        start = seq - len(messages)  # the seq before the request's first message, were it stored there
        if start < 0 or stored_id != client_id(seq - 1, messages[-1]):
            continue
        before = Message.objects.filter(session=session, seq=seq - 1).values_list("client_id", flat=True).first()
        if len(messages) == 1 or _same(before or "", len(messages) - 2, messages, start):
            return Placed(session, len(messages), {}, start, behind=True)
    return None


def _rebased(session: AgentSession, messages: list[Any]) -> Placed | None:
    """The client compacted its own history (Claude Code's ``/compact``, or its own automatic one): the
    request starts with its summary. The conversation goes on in the same session, as a compact
    boundary in its transcript does on import: the request's messages follow what is stored (its n-th
    message is then seq ``proxy_base`` + n), and the summary, once stored, compacts what came before it
    (``_client_compaction``)."""
    with transaction.atomic():
        locked = ingest.lock_open_session(session)
        if (placed := _new_from(locked, messages)) is not None:  # another request of it did this first
            return placed
        locked.metadata = {**locked.metadata, BASE: locked.last_seq}
        AgentSession.objects.filter(pk=locked.pk).update(metadata=locked.metadata)
    return Placed(locked, 0, {}, locked.last_seq)


def _client_compaction(session: AgentSession, summary: NormalizedMessage) -> None:
    narrative = message_text(summary.content).strip()
    if narrative:
        boundaries.boundary_apply(session=session, boundary=boundaries.Boundary(summary, narrative))


def _normalized_at(raw: Any, index: int, base: int) -> NormalizedMessage:
    """The request's ``index``-th message, identified by its place in the session; the first after a
    client's own compaction flagged as its summary (what a transcript flags ``isCompactSummary``)."""
    message = normalized(raw, base + index)
    if index == 0 and base and continues_after_compaction([raw]):
        return dataclasses.replace(message, metadata={**message.metadata, IS_COMPACT_SUMMARY: True})
    return message


def _base(session: AgentSession) -> int:
    value = session.metadata.get(BASE, 0)
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= session.last_seq else 0


def _append_one_by_one(session: AgentSession, start: int, messages: list[Any], base: int) -> Recorded:
    """A request whose new messages can't all be stored as they came (a block type ctxweb does not
    know, a tool result whose call could not be stored): each goes in on its own, and one the
    session can't hold is stored as a note of what it was, in its place, so the conversation goes on
    being recorded (the agent sends the same history again, and the note stands for it). Each such
    place is kept once for STATUS and admin."""
    created = 0
    for index in range(start, len(messages)):
        try:
            message = _normalized_at(messages[index], index, base)
            result = ingest.message_append(session=session, messages=[message], after_seq=base + index)
        except (MessageError, InvalidInput) as exc:
            log.warning("proxy: session %s: request message %s stored as a note: %s", session.pk, index + 1, exc)
            _rejected(session, index, exc)
            note = _note_of(messages[index], base + index, exc)
            result = ingest.message_append(session=session, messages=[note], after_seq=base + index)
        session, created = result.session, created + result.created
        provider_compactions(session, result.messages)
    return Recorded(session, created)


def _note_of(raw: Any, index: int, exc: MessageError | InvalidInput) -> NormalizedMessage:
    # A note is text: a tool message must carry its results, so a "tool" one's note is the user's.
    role = raw.get("role") if isinstance(raw, dict) and raw.get("role") in ("user", "assistant", "system") else "user"
    text = f"[ctxweb: this message could not be stored as it came: {str(exc)[:300]}]"
    return normalize_message(
        {"role": role, "content": [{"type": "text", "text": text}], "client_id": client_id(index, raw)}
    )


def _rejected(session: AgentSession, index: int, exc: MessageError | InvalidInput) -> None:
    """Kept for STATUS and admin (once: the agent sends the same history again with every request)."""
    code = exc.code if isinstance(exc.code, str) else "invalid"
    position = f"request message {index + 1}"
    if not IngestRejection.objects.filter(session=session, source="proxy", position=position, code=code).exists():
        recorded.rejection_record(session=session, source="proxy", position=position, problem=(code, str(exc)))


def proxy_record_exchange(
    *,
    session_id: int,
    after_seq: int,
    pending: dict[str, Any] | None,
    message: dict[str, Any] | None,
    complete: bool,
    key: str,
    gap: str = "",
) -> AgentSession | None:
    """What an exchange leaves to record once its answer is out: the request's messages when they
    waited (``pending``, its body), then the reply right after them (``after_seq``: the request's last
    message; the request's n-th message is a proxied session's seq ``proxy_base`` + n), in one append when they can
    be; the response's usage as the session's exact count; the requests of the conversation forwarded
    unrecorded before (``gap``: see ``proxy_gap_note``) flagged on it. The session recorded into (a
    rewritten history goes into a fresh one), or None when the session is gone."""
    session = proxy_session(session_id)
    if session is None:
        return None
    if gap:
        proxy_gaps.gap_flag(session_id, gap)
    reply = reply_message(session, message, complete, after_seq + 1) if message is not None else None
    stored: Message | None = None
    if pending is not None:
        done = proxy_record_request(session=session, body=pending, key=key, reply=reply)
        session, stored = done.session, done.reply
        if done.rejected:  # a reply is stored only after its request
            return session
    after_seq += _base(session)  # the request's last message in the session (``proxy_base``)
    if reply is not None and stored is None:
        try:
            result = ingest.message_append(session=session, messages=[reply], after_seq=after_seq)
        except InvalidInput as exc:  # a tool id the session holds already: the agent's copy comes next time
            log.info("proxy: session %s: the reply was not stored: %s", session.pk, exc)
            return session
        except Conflict:
            # Closed meanwhile, or the next request was recorded first, with this reply in it; or the
            # request was sent again after its stream was cut, and this is the whole reply.
            stored = cut_reply_completed(session, after_seq, reply) if complete else None
            if stored is None:
                return session
            session = proxy_session(session.pk) or session
        else:
            session, stored = result.session, (result.messages[0] if result.created else None)
            provider_compactions(session, result.messages)
    applied = as_dict(message.get("context_management")).get("applied_edits") if message is not None else None
    if stored is not None and applied:  # the provider cleared tool results before its model read the request
        requested = as_dict(as_dict(pending).get("context_management")).get("edits")
        if provider_edits.provider_edits_apply(
            session=session, reply_seq=stored.seq, applied=applied, requested=requested
        ):
            session = proxy_session(session.pk) or session
    if stored is not None and message is not None and complete:
        before = session.system_tokens + session.tool_tokens + session.message_tokens - stored.tokens
        before += DEFAULT_FRAMING.request  # the estimate of the request, as its count would be
        exact_from_usage(session, as_dict(message.get("usage")), reply_seq=stored.seq, raw_request=before)
    return session


def _new_from(session: AgentSession, messages: list[Any]) -> Placed | None:
    """Where the request's new messages start, or None when its history is not the stored one: the
    stored message at the request's end, or at the stored end (and the one before it), must be the
    request's at the same place (its n-th message is seq ``proxy_base`` + n). A request that is behind
    what is stored (a retry; one recorded after the request that followed it) has nothing new. One
    query, which also reads the replies there."""
    base = _base(session)
    stored = session.last_seq - base
    if stored == 0:
        return Placed(session, 0, {}, base)
    at = min(stored, len(messages))
    if at == 0:
        return None
    rows = Message.objects.filter(session=session, seq__in=[base + at - 1, base + at], seq__gte=base + 1)
    found = {seq - base: (cid or "", content) for seq, cid, content in rows.values_list("seq", "client_id", "content")}
    if not all(_same(cid, n - 1, messages, base) for n, (cid, _) in found.items()):
        return None
    replies = {n: content for n, (cid, content) in found.items() if cid.startswith(REPLY_PREFIX)}
    return Placed(session, at, replies, base)


def _same(stored_id: str, index: int, messages: list[Any], base: int) -> bool:
    # A reply recorded from a response stands for whatever the agent made of it (it may drop empty
    # blocks or thinking signatures): any assistant message in its place.
    if stored_id.startswith(REPLY_PREFIX):
        return isinstance(messages[index], dict) and messages[index].get("role") == "assistant"
    return stored_id == client_id(base + index, messages[index])


def _continue_in_fresh_session(session: AgentSession, body: dict[str, Any], key: str) -> AgentSession:
    """A fresh session for conversation ``key``, linked to ``session``, that the request's whole
    history goes into; the session that held the key keeps its messages under a retired external id.
    When another request of the conversation made it first, that one."""
    with transaction.atomic():
        if session.external_id == key:
            retired = f"{key[: EXTERNAL_ID_MAX - 24]}@{session.pk}"
            AgentSession.objects.filter(pk=session.pk, external_id=key).update(external_id=retired)
        try:
            with transaction.atomic():
                return agent_sessions.session_create(
                    user=session.owner,
                    project=session.project,
                    name=session.name,
                    model=_model(body),
                    system_prompt=system_text(body.get("system")),
                    tools=as_list(body.get("tools")),
                    external_id=key,
                    parent=session,
                    metadata=_continuing(session),
                )
        except (Conflict, InvalidInput) as exc:
            found = _current(session.project, key)
            if found is None or (isinstance(exc, Conflict) and exc.code != "duplicate_external_id"):
                if isinstance(exc, InvalidInput):  # tools or a prompt a session can't hold: without them
                    return agent_sessions.session_create(
                        user=session.owner, project=session.project, name=session.name, model=_model(body),
                        external_id=key, parent=session, metadata=_continuing(session),
                    )  # fmt: skip
                raise
            return found


def _continuing(session: AgentSession) -> dict[str, Any]:
    kept = {k: session.metadata[k] for k in ("prompt", SIDECHAIN_OF) if k in session.metadata}
    return {"source": "proxy", "continues": session.pk, **kept}


def _current(project: Project, key: str) -> AgentSession | None:
    return _sessions().filter(project=project, external_id=key).first()


def _sessions() -> QuerySet[AgentSession]:
    # Without the system prompt and the tools, read on every request otherwise: an agent such as
    # Claude Code sends tens of kB of tool definitions (they are read when a context is built).
    return AgentSession.objects.select_related("project", "project__policy").defer("system_prompt", "tools")


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
