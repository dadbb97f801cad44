"""The messages of a proxied exchange (``services.proxy`` decides where they go): a request's, each
with a client id of its place and content; the model's reply as read from its response, placed
right after its request, completed when it came cut and was asked again, replaced by the agent's own
copy when that differs (what the model reads next); the provider's compactions it carries; and the
response's usage as the session's exact count."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from django.db import transaction

from compaction.messages import MessageError, NormalizedMessage, normalize_message
from sessions_app.engine import offline_tokenizer
from sessions_app.errors import Conflict, InvalidInput
from sessions_app.models import AgentSession, Message, MessageState, ToolUse
from sessions_app.services import boundaries, exact_usage, ingest, redaction

log = logging.getLogger(__name__)

REPLY_PREFIX = "px-reply-"  # client ids of replies recorded from a response


def replies_as_the_agent_kept_them(
    session: AgentSession, replies: dict[int, Any], messages: list[Any], *, base: int = 0
) -> None:
    """The replies recorded from their responses where the request's history meets the stored one
    (``replies``: the request's n-th message → stored content, stored at seq ``base`` + n), as the
    agent sent them back when that differs: it may drop a block or a signature, or give its tool
    calls ids of its own (the tool results that follow name those). The session holds what the model
    reads next; a copy the session can't hold leaves the reply as it was."""
    stored = {n: content for n, content in replies.items() if n <= len(messages)}
    copies = {}
    for n, content in stored.items():
        try:
            copy = redaction.message_redact(session.project, normalized(messages[n - 1], base + n - 1))
        except MessageError:
            continue
        if copy.role == "assistant" and identity(copy.content) != identity(content):
            copies[base + n] = copy
    if not copies:
        return
    tokenizer = offline_tokenizer()
    counts = {seq: tokenizer.count_message(copy.role, copy.content) for seq, copy in copies.items()}  # before the lock
    try:
        with transaction.atomic():
            locked = ingest.lock_open_session(session)
            for seq, copy in copies.items():
                row = (
                    Message.objects.select_for_update()
                    .filter(session=locked, seq=seq, state=MessageState.ACTIVE, compaction__isnull=True)
                    .first()
                )
                if row is None or not (row.client_id or "").startswith(REPLY_PREFIX):
                    continue
                ToolUse.objects.filter(session=locked, seq=seq).delete()
                ingest.check_tool_ids(locked, [copy])
                ToolUse.objects.bulk_create(ToolUse(session=locked, tool_use_id=t, seq=seq) for t in copy.tool_use_ids)
                ingest.stored_message_rewrite(locked, row, copy, counts[seq], client_id=True)
    except (InvalidInput, Conflict) as exc:
        log.info("proxy: session %s: a reply kept as recorded: %s", session.pk, exc)


def cut_reply_completed(session: AgentSession, after_seq: int, reply: NormalizedMessage) -> Message | None:
    """The whole reply in place of the one stored cut (its stream broke) right after the same request,
    when nothing followed it: the agent sent the request again and has the whole reply in its history.
    None when there is no such cut reply to complete."""
    try:
        return _cut_reply_replaced(session, after_seq, reply)
    except InvalidInput as exc:  # its tool ids are taken by another message: it stays as it was
        log.warning("proxy: session %s: the cut reply was kept: %s", session.pk, exc)
        return None


def _cut_reply_replaced(session: AgentSession, after_seq: int, reply: NormalizedMessage) -> Message | None:
    reply = redaction.message_redact(session.project, reply)
    tokens = offline_tokenizer().count_message(reply.role, reply.content)
    with transaction.atomic():
        locked = ingest.lock_open_session(session)
        row = Message.objects.select_for_update().filter(session=locked, seq=after_seq + 1).first()
        if (
            row is None
            or row.seq != locked.last_seq
            or row.role != "assistant"
            or row.state != MessageState.ACTIVE
            or row.compaction_id is not None
            or as_dict(as_dict(row.metadata).get("proxy")).get("cut") is not True
        ):
            return None
        ToolUse.objects.filter(session=locked, seq=row.seq).delete()  # the cut reply's calls: the whole one's follow
        ingest.check_tool_ids(locked, [reply])
        ToolUse.objects.bulk_create(ToolUse(session=locked, tool_use_id=t, seq=row.seq) for t in reply.tool_use_ids)
        ingest.stored_message_rewrite(locked, row, reply, tokens, client_id=True)
    return row


def reply_message(
    session: AgentSession, message: dict[str, Any], complete: bool, position: int
) -> NormalizedMessage | None:
    """The model's reply as a message to store at ``position`` (``complete`` False: the stream was
    cut, and what arrived is stored, marked as such); None when it says nothing. Its client id is
    its place and the answer's id: an upstream may send the same id twice (or none), a place holds
    one reply."""
    content = as_list(message.get("content"))
    if not complete:
        content = [*content, {"type": "text", "text": "[ctxweb: the response stream was cut here]"}]
    if not content:
        return None
    said = message.get("id")  # a response always has one; a cut stream may not have said it
    reply_id = said if isinstance(said, str) and said else hashlib.sha256(canonical(content)).hexdigest()
    raw = {
        "role": "assistant",
        "content": content,
        "client_id": f"{REPLY_PREFIX}{position}-{reply_id}"[:200],
        "metadata": {"proxy": {"stop_reason": message.get("stop_reason"), "cut": not complete}},
    }
    try:
        return normalize_message(raw)
    except MessageError as exc:
        log.warning("proxy: session %s: the reply was not stored: %s", session.pk, exc)
        return None


def provider_compactions(session: AgentSession, rows: list[Message]) -> None:
    """Each stored model message holding a provider's ``compaction`` block becomes a compaction of the
    session, its summary the checkpoint (an encrypted one: a note saying so), once: what came before
    is out of the context after."""
    for row in rows:
        if row.role != "assistant" or not isinstance(row.content, list):
            continue
        summaries = [
            b["content"]
            for b in row.content
            if isinstance(b, dict) and b.get("type") == "compaction" and isinstance(b.get("content"), str)
        ]
        if summaries and summaries[-1].strip():
            boundaries.provider_compaction_apply(session=session, reply_seq=row.seq, narrative=summaries[-1])
        elif boundaries.opaque_compaction(row.content):  # OpenAI's: its summary is encrypted
            boundaries.provider_compaction_apply(
                session=session, reply_seq=row.seq, narrative=boundaries.OPAQUE_NARRATIVE
            )


def exact_from_usage(session: AgentSession, reported: dict[str, Any], *, reply_seq: int, raw_request: int) -> None:
    """The response's usage as the session's exact count: what the model read (input, cache reads and
    writes) plus what it wrote, the context the next request starts from, while the reply ends the
    session (``exact_usage.exact_usage_record``)."""
    figures = [reported.get(k) for k in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")]
    read = sum(n for n in figures if isinstance(n, int) and not isinstance(n, bool) and n >= 0)
    wrote = reported.get("output_tokens")
    if not read or not isinstance(wrote, int) or isinstance(wrote, bool) or wrote < 0:
        return
    exact_usage.exact_usage_record(
        session=session, read=read, wrote=wrote, upto_seq=reply_seq, raw_request=raw_request, source="proxy"
    )


def normalized(raw: Any, index: int) -> NormalizedMessage:
    if not isinstance(raw, dict):
        raise MessageError("a message is a JSON object", code="invalid_message", index=index)
    return normalize_message({**raw, "client_id": client_id(index, raw)}, index=index)


def client_id(index: int, message: Any) -> str:
    """A request message's client id: its place and a hash of what it says (its ``identity``), so
    resending the same history, in whatever form, stores nothing twice and a changed history is told
    apart."""
    if isinstance(message, dict):
        message = {"role": message.get("role"), "content": identity(message.get("content"))}
    return f"px-{index}-{hashlib.sha256(canonical(message)).hexdigest()[:24]}"


def identity(content: Any) -> Any:
    """What a message's content says, whatever form a client gives it: without ``cache_control`` (a
    caching hint that Claude Code moves to the newest message with every request), and text as its
    words — a string, one text block and several in a row are the same text (Claude Code sends the
    newest user message as blocks, then as a string). Only for comparing: content is stored as it came."""
    if isinstance(content, str):
        return _text_run([content])
    if not isinstance(content, list):
        return content
    said: list[Any] = []
    texts: list[str] = []
    for block in content:
        # A text block with more than its text (citations) is a block of its own.
        plain = isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        if plain and set(block) <= {"type", "text", "cache_control"}:
            texts.append(block["text"])
            continue
        said += _text_run(texts)
        texts = []
        said.append(_block_identity(block))
    return said + _text_run(texts)


def _text_run(texts: list[str]) -> list[str]:
    words = " ".join(" ".join(texts).split())
    return [words] if words else []


def _block_identity(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    said = {k: v for k, v in block.items() if k != "cache_control"}
    if said.get("type") == "tool_result" and "content" in said:
        said["content"] = identity(said["content"])
    return said


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def encodes(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


def canonical(value: Any) -> bytes:
    # ASCII with escapes: any JSON value hashes, lone surrogates included.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()
