"""Claude Code JSONL session files → canonical messages, incrementally (``ClaudeCodeReader``).

``read`` (the one-shot import) does exactly what feeding the whole file to one reader does.

Each line of a Claude Code session file is one event. ``user`` and ``assistant`` lines are messages;
everything else (``summary``, ``system``, ``progress``, ``file-history-snapshot``,
``queue-operation``, unknown kinds, unparsable lines) is skipped and counted by kind, never fatal.

Rules, chosen so that feeding a file in any chunking gives exactly what reading it whole gives:

- **File order, no pruning.** Messages come out in the order their lines appear. A rewind (the user
  going back and re-prompting from an earlier point) leaves the abandoned branch in the file; it is
  kept, because a hook that uploads lines as they are written cannot know a branch will be
  abandoned. Each message keeps ``uuid`` / ``parent_uuid`` in metadata for whoever wants the tree.
- **Split responses are regrouped.** One API response is written as several ``assistant`` lines
  sharing ``message.id``, sometimes with tool-result ``user`` lines in between (newer versions run a
  tool while the response still streams). The lines become one assistant message placed where the
  response started; tool-result lines that arrive while it is open wait behind it. The group is
  final once a line that cannot belong to it arrives: an assistant line with another id, a user
  line that is not only tool results, or a compaction boundary. ``finish()`` flushes what is open
  (a caller that keeps feeding after ``finish()`` gets a late line of that response as ``<id>#2``).
  The reader's state lives in memory: to resume a file later, keep the reader or re-read from the top.
  ``client_id`` is ``message.id`` (``<id>#2`` if the same id reappears after its group closed) and
  the line's ``uuid`` for user lines, so re-uploads are idempotent. A repeated line ``uuid`` is
  skipped as ``duplicate``.
- **Sub-agents are kept apart.** ``isSidechain: true`` lines form separate conversations
  (``sidechain-<n>``, ``sidechain=True``), one per chain: lines sharing an ``agentId``, or else
  linked through ``parentUuid`` (a sidechain line whose parent is unknown continues the latest
  chain; one whose parent is missing or a main-conversation line starts a new one). A file whose
  first message line is a sidechain line is itself a sub-agent's file (``agent-*.jsonl``): that
  chain is its ``main`` conversation, with ``metadata["agent_id"]``.
- **Usage.** Every distinct response carrying ``usage`` gives a ``UsagePoint`` at its message's
  index; ``system`` lines with ``subtype: "compact_boundary"`` start a new segment (``segment_starts``:
  the index of the next message, which is Claude Code's summary, flagged ``is_compact_summary``, when
  the file is whole; ``boundary_facts``: the marker's ``trigger`` and ``pre_tokens``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .. import jsonvalues
from .base import (
    Block,
    Conversation,
    Message,
    Transcript,
    UniqueToolIds,
    UsagePoint,
    content_block,
    content_of,
    iso_or_none,
    make_message,
    nonempty_str,
)

FORMAT = "claude-code"
MAIN = "main"
# What the Claude Code hook sends in place of a line longer than it uploads (integrations/claude_code).
LINE_TOO_LONG = "ctxweb-line-too-long"
SYNTHETIC_MODEL = "<synthetic>"  # Claude Code's own stand-in messages (API errors, interruptions)


def read(text: str) -> Transcript:
    reader = ClaudeCodeReader()
    reader.feed(text.split("\n"))
    reader.finish()
    return Transcript(
        format=FORMAT,
        conversations=reader.conversations,
        skipped=dict(reader.skipped),
        cleaned=dict(reader.cleaned),
    )


@dataclass
class _Group:
    """An assistant response being reassembled from its lines."""

    message_id: str | None
    first: dict[str, Any]
    created_at: str | None = None  # the first line's (see ClaudeCodeReader._timestamp)
    blocks: list[Block] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    request_id: str | None = None
    model: str | None = None
    stop_reason: str | None = None
    is_api_error: bool = False


class _Chat:
    """One conversation being built: its finished messages, the open group and what waits behind it."""

    def __init__(self, conversation: Conversation) -> None:
        self.conv = conversation
        self.group: _Group | None = None
        self.waiting: list[Message] = []
        self.tool_ids = UniqueToolIds()
        self.client_ids: set[str] = set()
        self.responses_with_usage: set[str] = set()


class ClaudeCodeReader:
    """Reads Claude Code JSONL a chunk of complete lines at a time.

    ``feed(lines)`` returns ``(conversation key, message)`` for every message that became final;
    ``finish()`` returns the rest. ``conversations`` and ``skipped`` describe everything read so far.
    """

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()
        self.cleaned: Counter[str] = Counter()  # what jsonvalues.clean changed to make lines storable
        self.unreadable: list[tuple[int, str]] = []  # (line number, why): lines that hold no usable event
        self.cut_open: dict[str, int] = {}  # conversation -> index of the response ``finish()`` cut off
        self.lines_read = 0
        self._last_timestamp: str | None = None
        self._chats: dict[str, _Chat] = {}  # conversation key -> chat, in creation order
        self._chat_of_chain: dict[str, _Chat] = {}
        self._chain_of_uuid: dict[str, str] = {}
        self._last_side_chain: str | None = None
        self._sidechains = 0
        self._message_uuids: set[str] = set()
        self._summaries: list[tuple[str, str]] = []  # (leafUuid, summary)

    # ------------------------------------------------------------------ public

    def feed(self, lines: Iterable[str] | str | bytes) -> list[tuple[str, Message]]:
        if isinstance(lines, bytes | bytearray):
            lines = lines.decode("utf-8", errors="replace")
        if isinstance(lines, str):
            lines = lines.split("\n")
        out: list[tuple[str, Message]] = []
        for line in lines:
            self._line(line, out)
        return out

    def finish(self) -> list[tuple[str, Message]]:
        """Close every open response as it stands. ``cut_open`` records where each one went: a
        caller that later reads more of the file may find that response grown."""
        out: list[tuple[str, Message]] = []
        for chat in self._chats.values():
            if chat.group is not None:
                self.cut_open[chat.conv.key] = len(chat.conv.messages)
            self._close(chat, out)
        return out

    @property
    def conversations(self) -> list[Conversation]:
        """Main conversation first, then sub-agents in order of appearance; titles from ``summary`` lines."""
        for leaf, text in self._summaries:
            chat = self._chat_of_chain.get(self._chain_of_uuid.get(leaf, ""))
            if chat is not None:
                chat.conv.title = text
        convs = [chat.conv for chat in self._chats.values() if chat.conv.messages]
        return sorted(convs, key=lambda c: c.sidechain)

    @property
    def held_back(self) -> int:
        """Messages read but not final yet: open responses (which may still grow) and the tool results
        waiting behind them. ``finish()`` releases them; so does a later line that closes their group."""
        return sum((chat.group is not None) + len(chat.waiting) for chat in self._chats.values())

    # ------------------------------------------------------------------ lines

    def _line(self, raw: str | bytes, out: list[tuple[str, Message]]) -> None:
        self.lines_read += 1
        if isinstance(raw, bytes | bytearray):
            raw = raw.decode("utf-8", errors="replace")
        line = raw.strip().removeprefix("\ufeff").strip()
        if not line:
            return
        try:
            event = jsonvalues.loads(line, allow_nan=True)
        except ValueError as exc:
            self._unreadable("invalid_json", f"not JSON ({exc})")
            return
        if not isinstance(event, dict):
            self._unreadable("not_an_object", "a JSON value that is not an object")
            return
        event = jsonvalues.clean(event, self.cleaned)
        kind = event.get("type")
        if kind == LINE_TOO_LONG:
            size = event.get("bytes")
            self._unreadable(
                "too_long",
                f"a line of {size:,} bytes was too long to upload and was left out"
                if isinstance(size, int)
                else "a line too long to upload was left out",
            )
            return
        if kind in ("user", "assistant") and isinstance(event.get("message"), dict):
            uuid = nonempty_str(event.get("uuid"))
            if uuid is not None and uuid in self._message_uuids:
                self.skipped["duplicate"] += 1
                return
            if uuid is not None:
                self._message_uuids.add(uuid)
            chat = self._chat(self._chain(event), event)
            if kind == "user":
                self._user(chat, event, out)
            else:
                self._assistant(chat, event, out)
            return
        if kind in ("user", "assistant"):
            self._unreadable(f"{kind}_without_message", f"a {kind} line without a message object")
        else:
            self.skipped[kind if isinstance(kind, str) and kind else "unknown"] += 1
        chain = self._chain(event)
        if kind == "summary" and nonempty_str(event.get("leafUuid")) and isinstance(event.get("summary"), str):
            self._summaries.append((event["leafUuid"], event["summary"]))
        if kind == "system" and event.get("subtype") == "compact_boundary":
            bounded = self._chat_of_chain.get(chain)
            if bounded is not None:
                self._close(bounded, out)
                start = len(bounded.conv.messages)
                if start not in bounded.conv.segment_starts:
                    bounded.conv.segment_starts.append(start)
                bounded.conv.boundary_facts[start] = _boundary_facts(event)

    def _timestamp(self, event: dict[str, Any]) -> str | None:
        """The line's time, or (when it has none that can be stored) the time of the line before it:
        the same in any chunking, and the timeline keeps its order."""
        stamp = iso_or_none(event.get("timestamp"))
        if stamp is None:
            return self._last_timestamp
        self._last_timestamp = stamp
        return stamp

    def _unreadable(self, kind: str, why: str) -> None:
        self.skipped[kind] += 1
        self.unreadable.append((self.lines_read, why))

    def _chain(self, event: dict[str, Any]) -> str:
        """Which conversation a line belongs to (registering its uuid so children can follow)."""
        uuid = nonempty_str(event.get("uuid"))
        if event.get("isSidechain") is not True:
            chain = MAIN
        else:
            parent = nonempty_str(event.get("parentUuid")) or nonempty_str(event.get("logicalParentUuid"))
            agent = nonempty_str(event.get("agentId"))
            if agent is not None:
                chain = f"agent:{agent}"
            elif parent is not None and self._chain_of_uuid.get(parent, MAIN) != MAIN:
                chain = self._chain_of_uuid[parent]
            elif parent is not None and parent not in self._chain_of_uuid and self._last_side_chain:
                chain = self._last_side_chain
            else:
                chain = f"chain:{uuid or self.lines_read}"
            self._last_side_chain = chain
        if uuid is not None:
            self._chain_of_uuid.setdefault(uuid, chain)
        return chain

    def _chat(self, chain: str, event: dict[str, Any]) -> _Chat:
        chat = self._chat_of_chain.get(chain)
        if chat is not None:
            return chat
        session = nonempty_str(event.get("sessionId"))
        agent = nonempty_str(event.get("agentId"))
        if chain == MAIN or not self._chats:  # the file's first conversation is its main one
            chat = self._chats.get(MAIN)
            if chat is None:
                conv = Conversation(key=MAIN)
                if chain != MAIN:  # a sub-agent's own file
                    conv.metadata["sidechain_file"] = True
                    if agent:
                        conv.metadata["agent_id"] = agent
                conv.external_id = f"{session}:agent-{agent}" if session and agent and chain != MAIN else session
                chat = self._chats[MAIN] = _Chat(conv)
            self._chat_of_chain.setdefault(MAIN, chat)
        else:
            self._sidechains += 1
            key = f"sidechain-{self._sidechains}"
            conv = Conversation(key=key, sidechain=True)
            if agent:
                conv.metadata["agent_id"] = agent
            if session:
                conv.external_id = f"{session}:agent-{agent}" if agent else f"{session}:{key}"
            chat = self._chats[key] = _Chat(conv)
        self._chat_of_chain[chain] = chat
        return chat

    # ------------------------------------------------------------------ messages

    def _user(self, chat: _Chat, event: dict[str, Any], out: list[tuple[str, Message]]) -> None:
        content = content_of(event["message"].get("content"))
        metadata = _line_facts(event)
        for flag, name in (
            ("isMeta", "is_meta"),
            ("isCompactSummary", "is_compact_summary"),
            ("isVisibleInTranscriptOnly", "visible_in_transcript_only"),
        ):
            if event.get(flag) is True:
                metadata[name] = True
        msg = make_message(
            "user",
            content,
            client_id=nonempty_str(event.get("uuid")),
            created_at=self._timestamp(event),
            metadata=metadata,
        )
        only_results = isinstance(content, list) and bool(content) and all(b["type"] == "tool_result" for b in content)
        if chat.group is not None and only_results:
            chat.waiting.append(msg)  # the response may still add tool calls after this result
            return
        self._close(chat, out)
        self._emit(chat, msg, out)

    def _assistant(self, chat: _Chat, event: dict[str, Any], out: list[tuple[str, Message]]) -> None:
        body = event["message"]
        message_id = nonempty_str(body.get("id"))
        stamp = self._timestamp(event)
        group = chat.group
        if group is None or message_id is None or group.message_id != message_id:
            self._close(chat, out)
            group = chat.group = _Group(message_id=message_id, first=event, created_at=stamp)
        content = content_of(body.get("content"))
        if isinstance(content, str):
            content = [content_block(content)] if content else []
        group.blocks.extend(content)
        if isinstance(body.get("usage"), dict):
            group.usage = body["usage"]
        group.request_id = group.request_id or nonempty_str(event.get("requestId"))
        group.model = nonempty_str(body.get("model")) or group.model
        group.stop_reason = nonempty_str(body.get("stop_reason")) or group.stop_reason
        group.is_api_error = group.is_api_error or event.get("isApiErrorMessage") is True
        if message_id is None:  # nothing to regroup by: a message of its own
            self._close(chat, out)

    def _close(self, chat: _Chat, out: list[tuple[str, Message]]) -> None:
        """Emit the open group (if any), then the lines that waited behind it."""
        group, chat.group = chat.group, None
        if group is not None:
            first = group.first
            metadata = _line_facts(first)
            for name, value in (
                ("model", group.model),
                ("request_id", group.request_id),
                ("stop_reason", group.stop_reason),
            ):
                if value is not None:
                    metadata[name] = value
            if group.is_api_error:
                metadata["is_api_error"] = True
            usage = _usage(group.usage)
            if usage:
                metadata["usage"] = usage
            msg = make_message(
                "assistant",
                group.blocks,
                client_id=group.message_id or nonempty_str(first.get("uuid")),
                created_at=group.created_at,
                metadata=metadata,
            )
            index = len(chat.conv.messages)
            self._emit(chat, msg, out)
            if group.model != SYNTHETIC_MODEL:
                chat.conv.model = group.model or chat.conv.model
                context = sum(
                    usage.get(k, 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
                )
                response = group.message_id or msg["client_id"] or str(index)
                if usage and context > 0 and response not in chat.responses_with_usage:
                    chat.responses_with_usage.add(response)
                    chat.conv.usage_points.append(
                        UsagePoint(index, context, usage.get("output_tokens", 0), group.request_id)
                    )
        waiting, chat.waiting = chat.waiting, []
        for msg in waiting:
            self._emit(chat, msg, out)

    def _emit(self, chat: _Chat, msg: Message, out: list[tuple[str, Message]]) -> None:
        cid = msg["client_id"]
        if cid is not None:
            n = 2
            while msg["client_id"] in chat.client_ids:
                msg["client_id"] = f"{cid}#{n}"
                n += 1
            chat.client_ids.add(msg["client_id"])
        chat.tool_ids.apply(msg)
        chat.conv.messages.append(msg)
        out.append((chat.conv.key, msg))


def _line_facts(event: dict[str, Any]) -> dict[str, Any]:
    facts: dict[str, Any] = {}
    for source, name in (("uuid", "uuid"), ("parentUuid", "parent_uuid")):
        value = nonempty_str(event.get(source))
        if value is not None:
            facts[name] = value
    return facts


def _boundary_facts(event: dict[str, Any]) -> dict[str, Any]:
    """What a compact boundary says of itself: Claude Code's trigger (auto / manual) and its own count
    of the context before (``compactMetadata``); only the values of the expected kinds."""
    meta = event.get("compactMetadata")
    if not isinstance(meta, dict):
        return {}
    facts: dict[str, Any] = {}
    if (trigger := nonempty_str(meta.get("trigger"))) is not None:
        facts["trigger"] = trigger[:50]
    if isinstance(pre := meta.get("preTokens"), int) and not isinstance(pre, bool) and pre >= 0:
        facts["pre_tokens"] = pre
    return facts


def _usage(raw: dict[str, Any] | None) -> dict[str, int]:
    if not isinstance(raw, dict):
        return {}
    return {
        k: v
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
        if isinstance(v := raw.get(k), int) and not isinstance(v, bool)
    }
