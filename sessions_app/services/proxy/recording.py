"""What the proxy records of an exchange (``api/proxy/views`` forwards; this stores): the request's
new messages (``proxy_record_request``) and the model's reply with its usage
(``proxy_record_exchange``), each one step of an exchange, run by the recorder once the answer is out.

An agent resends its whole history with every request. Each request appends only what is new since
the session's last stored message; the model's reply is appended when its response (or stream)
ends; the response's ``usage`` becomes the session's exact count and teaches the model's
calibration. A client's own compaction (its history starting with its summary) goes on in the same
session. Nothing here talks to Anthropic, and the caller's API key never reaches this module. What
goes upstream for ``proxy_compaction`` is ``upstream``; requests missed while the database was
down, ``gaps``.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from django.db import transaction

from compaction.messages import MessageError, NormalizedMessage, normalize_message
from compaction.reversible import message_text
from compaction.tokens import DEFAULT_FRAMING
from compaction.transcripts.responses import holds_a_compaction, is_compact_summary
from sessions_app.errors import Conflict, InvalidInput
from sessions_app.models import (
    AgentSession,
    IngestRejection,
    Message,
    Project,
    SessionStatus,
)
from sessions_app.selectors import access, session_rows
from sessions_app.selectors.session_rows import Ends
from sessions_app.services import (
    boundaries,
    ingest,
    provider_edits,
    recorded,
)
from sessions_app.services.proxy import gaps as proxy_gaps
from sessions_app.services.proxy.identity import continues_after_compaction
from sessions_app.services.proxy.messages import (
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
from sessions_app.services.proxy.sessions import continue_in_fresh_session, conversation_session, proxy_session

if TYPE_CHECKING:
    pass  # AUTH_USER_MODEL

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Recorded:
    session: AgentSession
    appended: int  # messages of the request stored now (0: nothing new)
    rejected: str = ""  # why the request's new messages could not be stored ("" when they were)
    reply: Message | None = None  # the reply, when it was stored with them (in the same append)


def proxy_record_request(
    *,
    session: AgentSession,
    body: dict[str, Any],
    key: str,
    reply: NormalizedMessage | None = None,
    ends: Ends | None = None,
) -> Recorded:
    """Append what the request holds beyond the session's stored messages, and ``reply`` (the model's
    answer to it) after them in the same append when they end the session. ``key``: the request's
    conversation. A request whose history no longer starts with the stored messages, or whose
    session was closed (archived, handed off), continues in a fresh session linked to this one.

    Several processes record a conversation's exchanges at once, in any order: the new messages go
    in only where the session was seen to end (``after_seq``), and a recording that stored there
    first sends this one back to be placed again, so nothing is stored twice or out of its place.
    ``ends``: the session's last messages, read with it (``session_rows.session_and_ends``)."""
    messages = as_list(body.get("messages"))
    for _ in range(_PLACINGS):
        placed = _place(session, messages, key, body, ends)
        ends = None  # of the session as it was first read
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
    summary = next((m for m in batch if m.metadata.get(IS_COMPACT_SUMMARY)), None) if start == 0 and base else None
    if summary is not None:
        _client_compaction(result.session, summary)
    stored_reply = result.messages[-1] if with_reply else None
    return Recorded(result.session, result.created - (stored_reply is not None), reply=stored_reply)


class Placed(NamedTuple):
    session: AgentSession  # where the request's messages go
    start: int  # the first of them not stored yet
    replies: dict[int, Any]  # the stored replies read from responses where the histories meet: position → content
    base: int = 0  # the seq before the request's first message (``proxy_base``)
    behind: bool = False  # a request from before the client's last compaction: nothing of it is new


def _place(
    session: AgentSession, messages: list[Any], key: str, body: dict[str, Any], ends: Ends | None = None
) -> Placed | None:
    """The session the request's messages go into and where its new ones start: this one, if its
    stored history is the request's; else the conversation's current session (it may have moved on to
    a fresh one since this was looked up), if that one's is; else a fresh session continuing it.
    None when even the fresh one holds another history (two rewrites at once)."""
    if session.status == SessionStatus.ACTIVE and _starts_over(session, messages):
        return _rebased(session, messages)
    if session.status == SessionStatus.ACTIVE and (placed := _new_from(session, messages, ends)) is not None:
        return placed
    current = conversation_session(session.project, key)
    movable = current is not None and current.pk != session.pk and current.status == SessionStatus.ACTIVE
    if movable and current is not None and (placed := _new_from(current, messages)) is not None:
        return placed
    target = current if movable and current is not None else session
    if target.status == SessionStatus.ACTIVE and (placed := _behind_a_compaction(target, messages)) is not None:
        return placed
    if target.status == SessionStatus.ACTIVE and continues_after_compaction(messages):
        return _rebased(target, messages)
    return _new_from(continue_in_fresh_session(current or session, body, key), messages)


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


def _starts_over(session: AgentSession, messages: list[Any]) -> bool:
    """Codex compacted its history and the request is the first to start over from it: it holds the
    summary (or the provider's compaction item) after the user's messages Codex keeps, and the
    session holds something else in that place. (Those kept messages are the conversation's first
    ones again: where they meet the stored ones, the request would pass for one behind them.)"""
    marked = next((n for n, m in enumerate(messages) if isinstance(m, dict) and codex_marker(m)), None)
    base = _base(session)
    if marked is None or session.last_seq <= base:
        return False
    stored = Message.objects.filter(session=session, seq=base + marked + 1).values_list("client_id", flat=True).first()
    return stored != client_id(base + marked, messages[marked])


def _rebased(session: AgentSession, messages: list[Any]) -> Placed | None:
    """The client compacted its own history (Claude Code's ``/compact``, or its own automatic one): the
    request starts with its summary. The conversation goes on in the same session, as a compact
    boundary in its transcript does on import: the request's messages follow what is stored (its n-th
    message is then seq ``proxy_base`` + n), and the summary, once stored, compacts what came before it
    (``_client_compaction``)."""
    with transaction.atomic():
        locked = ingest.lock_open_session(session)
        if not _starts_over(locked, messages) and (placed := _new_from(locked, messages)) is not None:
            return placed  # another request of it did this first
        locked.metadata = {**locked.metadata, BASE: locked.last_seq}
        AgentSession.objects.filter(pk=locked.pk).update(metadata=locked.metadata)
    return Placed(locked, 0, {}, locked.last_seq)


def _client_compaction(session: AgentSession, summary: NormalizedMessage) -> None:
    narrative = message_text(summary.content).strip()
    if narrative:
        boundaries.boundary_apply(session=session, boundary=boundaries.Boundary(summary, narrative))


def _normalized_at(raw: Any, index: int, base: int) -> NormalizedMessage:
    """The request's ``index``-th message, identified by its place in the session; after a client's own
    compaction, its summary flagged (what a transcript flags ``isCompactSummary``): Claude Code's opens
    the history, Codex's follows the user's messages it keeps."""
    message = normalized(raw, base + index)
    codex = isinstance(raw, dict) and is_compact_summary(raw)
    if base and ((index == 0 and continues_after_compaction([raw])) or codex):
        return dataclasses.replace(message, metadata={**message.metadata, IS_COMPACT_SUMMARY: True})
    return message


def proxy_continued(project: Project, response_id: str) -> tuple[AgentSession, list[dict[str, Any]]] | None:
    """The session holding the reply the provider gave as ``response_id`` in ``project``, and the
    history up to it (what a request continuing from that response stands on: the provider keeps it,
    the request sends only its new input); None when ctxweb recorded no such response."""
    if not response_id or len(response_id) > 150 or not access.storable(response_id):
        return None  # no stored id holds it: a NUL or a lone surrogate no database takes in a query
    replies = Message.objects.filter(session__project=project, role="assistant", client_id__startswith=REPLY_PREFIX)
    reply = replies.filter(client_id__endswith=f"-{response_id}").order_by("-session_id", "-seq").first()
    session = proxy_session(reply.session_id) if reply is not None else None
    if reply is None or session is None:
        return None
    rows = Message.objects.filter(session=session, seq__gt=_base(session), seq__lte=reply.seq).order_by("seq")
    return session, [{"role": role, "content": content} for role, content in rows.values_list("role", "content")]


def codex_marker(message: dict[str, Any]) -> bool:
    return is_compact_summary(message) or holds_a_compaction(message)


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
    # Where the request's history meets the stored one is read with the session when there is a request.
    ends: Ends | None = None
    if pending is None:
        session = proxy_session(session_id)
    else:
        session, ends = session_rows.session_and_ends(session_id) or (None, None)
    if session is None:
        return None
    if gap:
        proxy_gaps.gap_flag(session_id, gap)
    reply = reply_message(session, message, complete, after_seq + 1) if message is not None else None
    stored: Message | None = None
    if pending is not None:
        done = proxy_record_request(session=session, body=pending, key=key, reply=reply, ends=ends)
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


def _new_from(session: AgentSession, messages: list[Any], known: Ends | None = None) -> Placed | None:
    """Where the request's new messages start, or None when its history is not the stored one: the
    stored message at the request's end, or at the stored end (and the one before it), must be the
    request's at the same place (its n-th message is seq ``proxy_base`` + n). A request that is behind
    what is stored (a retry; one recorded after the request that followed it) has nothing new. One
    query, which also reads the replies there (none when ``known`` holds them)."""
    base = _base(session)
    stored = session.last_seq - base
    if stored == 0:
        return Placed(session, 0, {}, base)
    at = min(stored, len(messages))
    if at == 0:
        return None
    seqs = [seq for seq in (base + at - 1, base + at) if seq > base]
    ends = known.covering(session, seqs) if known is not None else None
    if ends is None:
        ends = ingest.stored_ids_and_contents(session, seqs)
    found = {seq - base: (cid or "", content) for seq, (cid, content) in ends.items()}
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
