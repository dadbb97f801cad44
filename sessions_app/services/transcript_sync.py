"""A transcript uploaded a few lines at a time (the Claude Code hook, ``integrations/claude_code/``)
becomes exactly the sessions a one-shot ``ctx import`` of the whole file makes.

The uploader never parses. It sends the complete lines added to the file since its last upload,
with the byte ``offset`` they start at; the server re-reads everything received so far with the
reader ``ctx import`` uses and appends, in order, the messages beyond those it already stored:

- **One reader.** Claude Code splits a response over several lines, interleaves tool results with
  it, writes sub-agents into the same file, repeats lines, records the user message each request
  sent: only ``ClaudeCodeReader`` knows those rules, so only it decides what a message is. A
  response that may still grow and the user lines a request may yet stand for are held back until
  a later line settles them, or until an upload says ``final`` (Stop, SessionEnd, PreCompact),
  which lets everything go as it stands, as the end of the file does for an import. Where a final
  upload let held user lines go, every later re-read seals them there (``sealed``, line counts), so
  a request blob for them is skipped in every read: the session keeps those lines where an import
  of the whole file has the blob's one message (a Stop comes after a response, when none are held).
- **Same result in any chunking.** The reader is deterministic and the messages it has made final
  never change, so the n-th message of a longer read is the n-th of a shorter one. Each
  conversation keeps a count of the messages already appended (``emitted``); an upload appends the
  rest. Messages keep the reader's ``client_id`` (response id / line uuid), so even a retry that
  somehow got past the offset check stores nothing twice.
- **Offsets, not trust.** An upload must start where the server's copy ends, or inside it (a
  repeat: the overlap must match byte for byte, and is ignored). A gap answers 409
  ``transcript_offset`` with ``expected_offset``; the uploader resends from there.
- **Where the text lives.** The raw text is needed for every re-read, so the server keeps it in the
  database (``TranscriptChunk``: one row of new bytes per upload, written in the transaction that
  moves the cursor), never in a cache: any process, after any restart, continues from there. The
  session's metadata keeps the cursor (offset, SHA-256 of the text up to it, counts).
  Re-reading the whole text rather than keeping the reader's state (what the open groups, chains,
  ids and orphan checks need to resume) is a choice: that state spans the reader, the candidates'
  tool-call set and the boundaries' indexes, and a field left out of it would break "any chunking
  gives the import" only across processes, where nothing would show it; the bytes also let a
  repeat be checked byte for byte. The cost is a re-read per upload (docs/BENCHMARKS.md).
- **A lost copy.** A session whose cursor has no text behind it (synced before the text was kept
  in the database, or archived by the pruner, which drops it) answers ``expected_offset: 0``; the
  uploader, who has the file, sends it again from the top, and nothing is appended until the
  server again holds at least what it had (checked against the SHA-256), so that resend stores
  nothing twice either.
- **Claude Code's own compactions** (a compact boundary and its summary) are applied once the
  summary message is stored (``services.boundaries``), whichever upload brings it: each message is
  appended once, so each boundary applies once, at the same message as in an import.
- **Sub-agents** (sidechain conversations) get sessions of their own, named and identified as
  ``ctx import`` names them (``<name> · sub-agent <n>``, external id ``<external id>:sidechain-<n>``).
- **Proxy and hook both on.** The proxy records Claude Code's main conversation in the session
  whose external id is Claude Code's session id, the one the hook uploads to (``services.proxy``):
  such a session keeps the uploaded text and cursor but takes no message from it (the proxy's are
  what the model read, with the exact usage), so the user sees one session. A hook session that
  already holds messages when the proxy first sees the conversation stays the hook's; the proxy's
  copy is its child.
- **Model.** The session follows the model the transcript names (the last one, as import takes),
  unless someone changed it by hand.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import transaction

from compaction.messages import NormalizedMessage
from compaction.numbers import whole_number
from compaction.transcripts.claude_code import ClaudeCodeReader
from compaction.transcripts.codex import CodexReader
from sessions_app.errors import Conflict, InvalidInput, TooLarge
from sessions_app.models import SIDECHAIN_OF, AgentSession, Project, SessionStatus, TranscriptChunk
from sessions_app.selectors.usage import continuation_of, session_status
from sessions_app.services import agent_sessions, recorded, redaction, sealing, transcript_usage

if TYPE_CHECKING:
    from django.contrib.auth.models import User  # AUTH_USER_MODEL

FORMATS = ("claude-code", "codex")
_READERS: dict[str, type[ClaudeCodeReader | CodexReader]] = {"claude-code": ClaudeCodeReader, "codex": CodexReader}
STATE = "transcript"  # key of the cursor in the main session's metadata
SOURCE = "transcript"  # what rejections of this path are recorded as
DEFAULT_MODEL = "claude-sonnet-4-5"  # what an import takes when the transcript names no model


class OffsetMismatch(Conflict):
    """The upload doesn't start where the server's copy ends: resend from ``expected_offset``."""

    code = "transcript_offset"

    def __init__(self, detail: str, *, expected_offset: int) -> None:
        super().__init__(detail)
        self.expected_offset = expected_offset


@dataclass
class SyncResult:
    session: AgentSession
    offset: int  # bytes of the transcript the server holds: the next upload starts there
    received: int  # bytes of this upload that were new
    created: int  # messages stored by this upload, sub-agents' included
    held_back: int  # messages read but not final yet (an open response, the user lines held behind it)
    rejected: int  # lines or messages of this upload that could not be stored (skipped, recorded)
    complete: bool  # False while the server is still receiving again what it had before it lost its copy
    sidechains: list[int]
    created_session: bool
    # Sessions whose messages this upload added to or grew: the caller runs ``tasks.followup_send`` for them.
    appended_to: list[int] = field(default_factory=list)


def transcript_sync(
    *,
    user: User,
    project: Project,
    external_id: str,
    offset: int,
    lines: str,
    final: bool = False,
    name: str = "",
    fmt: str = "claude-code",
) -> SyncResult:
    """Append the messages that ``lines`` (complete JSONL lines starting at byte ``offset`` of the
    transcript) make final to the session with ``external_id`` in ``project``, creating it if needed."""
    if fmt not in FORMATS:
        raise InvalidInput(f"Line-by-line upload supports {', '.join(FORMATS)}.", code="invalid_format", field="format")
    if lines and not lines.endswith("\n"):
        raise InvalidInput(
            "lines holds complete JSONL lines, each ending with a newline; send a partial last line once it is "
            "complete.",
            code="partial_line",
            field="lines",
        )
    redaction.identifier_check(project, external_id, "external_id")
    data = lines.encode("utf-8", errors="replace")
    with transaction.atomic():
        session, created_session = _main_session(user=user, project=project, external_id=external_id, name=name)
        result = SyncResult(session, 0, 0, 0, 0, 0, True, [], created_session)
        _sync(result, user=user, fmt=fmt, offset=offset, data=data, final=final)
    result.session.refresh_from_db()
    return result


def _sync(result: SyncResult, *, user: User, fmt: str, offset: int, data: bytes, final: bool) -> None:
    """Under the main session's row lock: check the offset, extend the text, read it, append."""
    session = result.session
    state = _state(session, fmt)
    durable = state["offset"]
    result.offset, result.held_back, result.sidechains = durable, state.get("held_back", 0), _sidechain_ids(state)
    if not data and offset == durable and not (final and state.get("final_at") != durable):
        return  # a run with no new lines and nothing to flush: the status is all there is to say
    text = _held_text(session, state)
    have = len(text)
    if offset > have:
        raise OffsetMismatch(
            f"This upload starts at byte {offset:,}, but the server holds {have:,} bytes of the transcript"
            + (" (its copy was dropped)" if have < durable else "")
            + f"; send again from byte {have:,}.",
            expected_offset=have,
        )
    overlap = min(len(data), have - offset)
    if data[:overlap] != text[offset : offset + overlap]:
        raise Conflict(
            f"Bytes {offset:,}–{offset + overlap:,} differ from what this session received before: the transcript "
            "was rewritten. Start a new session (another external id).",
            code="transcript_changed",
        )
    new = data[overlap:]
    if have + len(new) > settings.CTX_MAX_IMPORT_BYTES:
        raise TooLarge(f"The transcript would exceed {settings.CTX_MAX_IMPORT_BYTES:,} bytes, the import limit.")
    text += new
    result.offset, result.received = len(text), len(new)
    if len(text) < durable:  # still receiving again what a lost copy held: nothing to read yet
        result.complete = False
        _hold(session, have, new)
        return
    if have < durable and _digest(text[:durable]) != state["sha256"]:
        raise Conflict(
            "The transcript sent again differs from the one this session was built from: it was rewritten. "
            "Start a new session (another external id).",
            code="transcript_changed",
        )
    _hold(session, have, new)
    if not new and not (final and state.get("final_at") != len(text)):
        return  # nothing new to read
    # The proxy records this conversation (services.proxy): the text is kept, no message is added twice.
    recorded_by_proxy = session.metadata.get("source") == "proxy"
    read = _Read() if recorded_by_proxy else _read_and_append(session, state, text, final=final, user=user)
    result.created, result.held_back, result.rejected = read.created, read.held_back, read.rejected
    result.appended_to = sorted(read.appended_to)
    state.update(
        offset=len(text), sha256=_digest(text), held_back=result.held_back, final_at=len(text) if final else None
    )
    result.sidechains = _sidechain_ids(state)
    session.metadata[STATE] = state
    AgentSession.objects.filter(pk=session.pk).update(metadata=session.metadata)


def sync_summary(result: SyncResult) -> dict[str, Any]:
    """What ``POST /sessions/transcript/`` answers. ``session`` is the one the external id names;
    once it was handed off, ``continued_in`` names the session taking its messages, and ``status``
    is that session's."""
    live = _live(result.session)
    return {
        "session": result.session.pk,
        "continued_in": live.pk if live.pk != result.session.pk else None,
        "offset": result.offset,
        "received": result.received,
        "messages": result.created,
        "held_back": result.held_back,
        "rejected": result.rejected,
        "complete": result.complete,
        "sidechains": result.sidechains,
        "created": result.created_session,
        "status": session_status(live),
    }


# ----------------------------------------------------------------------------- reading


@dataclass
class _Read:
    created: int = 0
    rejected: int = 0
    held_back: int = 0
    appended_to: set[int] = field(default_factory=set)  # ids of the sessions that got messages


def _read_and_append(session: AgentSession, state: dict[str, Any], text: bytes, *, final: bool, user: User) -> _Read:
    """Re-read the whole transcript as ``ctx import`` does; store what the earlier reads hadn't.

    Per conversation, ``emitted`` counts the reader's messages already handled (stored or
    rejected): the reader is deterministic and never changes a message it has made final, so the
    rest are new. One exception: a response an upload marked ``final`` cut off while it was still
    being written (``growing``) is read again in full once its group is complete or the next final
    upload comes, and its new blocks are added to it."""
    reader = _reader(text, state, final=final, fmt=state["format"])
    emitted: dict[str, int] = state.setdefault("emitted", {})
    growing: dict[str, dict[str, Any]] = state.setdefault("growing", {})
    read = _Read(held_back=reader.held_back)
    for line, why in reader.unreadable[state.get("unreadable", 0) :]:
        recorded.rejection_record(session=session, source=SOURCE, position=f"line {line}", problem=("unreadable", why))
        read.rejected += 1
    state["unreadable"] = len(reader.unreadable)
    for conversation in reader.conversations:
        key = conversation.key
        own = _sidechain_session(session, conversation, state, user) if conversation.sidechain else session
        target = _live(own)
        messages = recorded.candidates(conversation)
        grown = growing.pop(key, None)
        if grown is not None and grown["index"] < len(messages):
            _grow(target, messages[grown["index"]], grown, read)
        elif grown is not None:
            growing[key] = grown  # still open: it may grow yet
        # The model first: a compaction the transcript records is measured as an import measures it.
        _follow_model(target, conversation.model, key, state)
        _follow_prompt(target, conversation.system_prompt)
        done = emitted.get(key, 0)
        # Every response the file reports, each written once and brought up to date when a later line
        # of it reports more (rows already as they are cost one read, not a write); before the
        # messages, as an import writes them: a recorded compaction measures the harness they show.
        transcript_usage.transcript_requests_record(
            session=target, keyed_by=own, responses=conversation.responses.values()
        )
        stored = recorded.conversation_append(
            session=target,
            conversation=conversation,
            candidates=messages,
            start=done,
            source=SOURCE,
            before_boundary=partial(transcript_usage.transcript_harness_record, session=target, keyed_by=own),
        )
        read.created, read.rejected = read.created + stored.created, read.rejected + stored.rejected
        if stored.created:
            read.appended_to.add(target.pk)
        emitted[key] = max(done, len(messages))
        transcript_usage.transcript_exact_record(session=target, keyed_by=own)
        cut = reader.cut_open.get(key)
        if cut is not None and (message := messages[cut].message) is not None and message.client_id:
            growing[key] = {"index": cut, "client_id": message.client_id, "blocks": _block_count(message)}
    return read


def _reader(text: bytes, state: dict[str, Any], *, final: bool, fmt: str) -> ClaudeCodeReader | CodexReader:
    """The reader after ``text``, sealed where earlier final uploads let held user lines go, so the
    messages already stored stay the reader's."""
    reader = _READERS[fmt]()
    lines = text.decode("utf-8", errors="replace").split("\n")
    done = 0
    for at in state.get("sealed", []):
        reader.feed(lines[done:at])
        reader.seal()
        done = at
    reader.feed(lines[done:])
    if final:
        if reader.replaceable:
            state.setdefault("sealed", []).append(len(lines) - 1)
        reader.finish()
    return reader


def _grow(target: AgentSession, candidate: recorded.Candidate, grown: dict[str, Any], read: _Read) -> None:
    """The response at ``grown["index"]`` was stored with ``grown["blocks"]`` blocks; add what it has now."""
    message = candidate.message
    if message is None or message.client_id != grown["client_id"] or _block_count(message) <= grown["blocks"]:
        return
    if recorded.message_extend(session=target, client_id=grown["client_id"], message=message) is not None:
        read.appended_to.add(target.pk)
        return
    # The stored message was compacted or summarized meanwhile: the new blocks follow as a message of
    # their own, before the results that answer them (still a valid request).
    assert isinstance(message.content, list)
    rest = NormalizedMessage(
        role=message.role,
        content=message.content[grown["blocks"] :],
        client_id=f"{grown['client_id']}+{grown['blocks']}",
        created_at=message.created_at,
        metadata={**message.metadata, "continues": grown["client_id"]},
    )
    more = recorded.append(
        session=target, candidates=[recorded.Candidate(rest, f"the rest of {grown['client_id']}")], source=SOURCE
    )
    read.created, read.rejected = read.created + more.created, read.rejected + more.rejected
    if more.created:
        read.appended_to.add(target.pk)


def _block_count(message: NormalizedMessage) -> int:
    return len(message.content) if isinstance(message.content, list) else 0


def _follow_model(session: AgentSession, model: str | None, key: str, state: dict[str, Any]) -> None:
    """The session takes the transcript's latest model, unless someone set another one by hand."""
    models: dict[str, str] = state.setdefault("models", {})
    wanted = recorded.model_name(model) or DEFAULT_MODEL
    if session.model != wanted and session.model == models.get(key, DEFAULT_MODEL):
        agent_sessions.session_update(session=session, model=wanted)
    models[key] = wanted


def _follow_prompt(session: AgentSession, prompt: str) -> None:
    """The session takes the system prompt a transcript holds (Codex's does; Claude Code's holds none),
    as an import of it does: it grows while the file's leading instructions are read."""
    if prompt and prompt != session.system_prompt:
        agent_sessions.session_update(session=session, system_prompt=prompt)


# ----------------------------------------------------------------------------- sessions


def _main_session(*, user: User, project: Project, external_id: str, name: str) -> tuple[AgentSession, bool]:
    """The session with this external id in the project, locked; created when there is none."""
    locked = AgentSession.objects.select_for_update()
    session = locked.filter(project=project, external_id=external_id).first()
    if session is not None:
        return session, False
    try:
        created = agent_sessions.session_create(
            user=user,
            project=project,
            name=name or external_id,
            model=DEFAULT_MODEL,
            external_id=external_id,
            metadata={"conversation": "main"},
        )
    except Conflict:  # a concurrent upload created it a moment ago
        return locked.get(project=project, external_id=external_id), False
    return locked.get(pk=created.pk), True


def _sidechain_session(main: AgentSession, conversation: Any, state: dict[str, Any], user: User) -> AgentSession:
    sessions: dict[str, int] = state.setdefault("sessions", {})
    known = AgentSession.objects.filter(pk=sessions.get(conversation.key, 0)).first()
    if known is not None:
        return known
    external_id = agent_sessions.fit(f"{main.external_id}:{conversation.key}", recorded.EXTERNAL_ID_MAX)
    session = AgentSession.objects.filter(project_id=main.project_id, external_id=external_id).first()
    if session is None:
        number = conversation.key.rsplit("-", 1)[-1]
        try:
            session = agent_sessions.session_create(
                user=user,
                project=main.project,
                name=agent_sessions.fit(f"{main.name} · sub-agent {number}", recorded.NAME_MAX),
                model=recorded.model_name(conversation.model) or DEFAULT_MODEL,
                external_id=external_id,
                metadata={"conversation": conversation.key, SIDECHAIN_OF: main.pk},
            )
        except Conflict:
            session = AgentSession.objects.get(project_id=main.project_id, external_id=external_id)
    sessions[conversation.key] = session.pk
    return session


def _live(session: AgentSession) -> AgentSession:
    """Where a conversation's new messages go: its session or, once that was handed off into a fresh
    linked session (the policy's ``auto_continue``), the newest continuation. The cursor stays with
    the first session, so an uploader keeps sending the same file with the same offsets."""
    seen = {session.pk}
    while session.status != SessionStatus.ACTIVE:
        following = continuation_of(session)
        if following is None or following in seen:
            break
        seen.add(following)
        session = AgentSession.objects.get(pk=following)
    return session


def _sidechain_ids(state: dict[str, Any]) -> list[int]:
    sessions: dict[str, int] = state.get("sessions", {})
    return [sessions[k] for k in sorted(sessions, key=lambda k: whole_number(k.rsplit("-", 1)[-1]) or 0)]


# ----------------------------------------------------------------------------- the cursor and the text


def _state(session: AgentSession, fmt: str) -> dict[str, Any]:
    state = session.metadata.get(STATE)
    if isinstance(state, dict) and state.get("format") == fmt and isinstance(state.get("offset"), int):
        return state
    # New, or a session made another way (by hand, by an import): its messages' client ids keep the
    # first upload from storing again what is already there.
    return {"format": fmt, "key": secrets.token_hex(8), "offset": 0, "sha256": _digest(b""), "emitted": {}}


def _held_text(session: AgentSession, state: dict[str, Any]) -> bytes:
    """The transcript's bytes the server holds: its chunks from byte 0, as far as they run on."""
    if state["offset"] == 0:  # a new cursor: nothing held, whatever an earlier one left
        TranscriptChunk.objects.filter(session=session).delete()
        return b""
    text = bytearray()
    for start, sealed in TranscriptChunk.objects.filter(session=session).order_by("start").values_list("start", "data"):
        data = sealing.unseal_bytes(bytes(sealed))
        if start != len(text) or data is None:  # a gap, or sealed under a key no longer configured
            break
        text += data
    return bytes(text)


def _hold(session: AgentSession, start: int, data: bytes) -> None:
    if data:  # sealed: the raw text holds whatever the agent wrote, secrets included
        TranscriptChunk.objects.create(session=session, start=start, data=sealing.seal_bytes(data))


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
