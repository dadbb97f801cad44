"""Claude Code JSONL session files → canonical messages, incrementally (``ClaudeCodeReader``).

``read`` (the one-shot import) does exactly what feeding the whole file to one reader does.

Each line of a Claude Code session file is one event. ``user`` and ``assistant`` lines are messages;
``api-request-blob`` lines hold what a request sent (below); everything else (``summary``,
``system``, ``progress``, ``attachment``, ``api-request``, ``queue-operation``, unknown kinds,
unparsable lines) is skipped and counted by kind, never fatal.

Rules, chosen so that feeding a file in any chunking gives exactly what reading it whole gives:

- **File order, no pruning.** Messages come out in the order their lines appear. A rewind (the user
  going back and re-prompting from an earlier point) leaves the abandoned branch in the file; it is
  kept, because a hook that uploads lines as they are written cannot know a branch will be
  abandoned. Each message keeps ``uuid`` / ``parent_uuid`` in metadata for whoever wants the tree.
- **Split responses are regrouped.** One API response is written as several ``assistant`` lines
  sharing ``message.id``, sometimes with tool-result ``user`` lines in between (newer versions run a
  tool while the response still streams). The lines become one assistant message placed where the
  response started; user lines read while it is open are held behind it. The group is final once
  a line that cannot belong to it arrives: an assistant line with another id, a user line that is
  not only tool results, a request blob that stands for the lines held behind it, or a
  compaction boundary. ``finish()`` flushes what is open
  (a caller that keeps feeding after ``finish()`` gets a late line of that response as ``<id>#2``).
  The reader's state lives in memory: to resume a file later, keep the reader or re-read from the top.
  ``client_id`` is ``message.id`` (``<id>#2`` if the same id reappears after its group closed) and
  the line's ``uuid`` for user lines, so re-uploads are idempotent. A repeated line ``uuid`` (a
  message's, or a compaction boundary's) is skipped as ``duplicate``.
- **The user message a request sent.** Claude Code writes parallel tool results as one ``user``
  line each, the API request merges them into one user message, and it injects what the lines
  don't hold (attachments as ``<system-reminder>`` blocks, reminders inside tool results). Newer
  versions write that message, exactly as sent, in an ``api-request-blob`` line before the request
  unless the user lines since the last response, taken together, are it (the ``api-request`` line
  after it names the message by hash). So user lines are held until the conversation's next
  response, a blob, a compaction boundary or ``finish()``. A blob replaces the lines held since the
  last response by ONE message with its content (``merged_user_message``: the first line's client
  id, uuid and time; ``metadata["blob"]``, its hash); an ``api-request`` whose hash is that of the
  held lines together merges them the same way. That is what the model read. Without either (older
  files) the lines come out as they are. A blob is skipped (counted) when it repeats a hash (a
  retry), finds no lines held, or answers other tool calls than they do; request lines name no
  conversation: theirs is the one holding lines (the main one when several do). ``finish()`` lets
  held lines go as they are and seals them: a blob read after it for them is skipped (``seal()``
  seals without emitting, for a caller that re-reads a file where an earlier read finished).
- **Sub-agents are kept apart.** ``isSidechain: true`` lines form separate conversations
  (``sidechain-<n>``, ``sidechain=True``), one per chain: lines sharing an ``agentId``, or else
  linked through ``parentUuid`` (a sidechain line whose parent is unknown continues the latest
  chain; one whose parent is missing or a main-conversation line starts a new one). A file whose
  first message line is a sidechain line is itself a sub-agent's file (``agent-*.jsonl``): that
  chain is its ``main`` conversation, with ``metadata["agent_id"]``.
- **Usage.** Every distinct response carrying ``usage`` gives a ``UsagePoint`` at its message's
  index, and a ``ResponseUsage`` (``Conversation.responses``: by ``message.id``, the newest line's
  usage, as soon as the line is read; not Claude Code's own stand-ins, model ``<synthetic>``).
  ``system`` lines with ``subtype: "compact_boundary"`` start a new segment (``segment_starts``: the
  index of the next message, which is Claude Code's summary, flagged ``is_compact_summary``, when the
  file is whole; ``boundary_facts``: the marker's ``trigger`` and ``pre_tokens``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from .base import (
    Conversation,
    Message,
    ResponseUsage,
    Transcript,
    UniqueToolIds,
    UsagePoint,
    content_of,
    iso_or_none,
    jsonl_event,
    nonempty_str,
)
from .claude_code_lines import (
    BLOB,
    REQUEST,
    RequestBlob,
    Response,
    answers_the_same_calls,
    blob_message,
    boundary_facts,
    lines_as_sent,
    merged_user_message,
    request_blob,
    sent_hash,
    user_line_message,
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


class _Chat:
    """One conversation being built: its finished messages, the open group and the user lines held
    behind it (read since the last response; a request blob may yet stand for them)."""

    def __init__(self, conversation: Conversation) -> None:
        self.conv = conversation
        self.group: Response | None = None
        self.held: list[Message] = []
        self.held_raw: list[Any] = []  # their content as written (what Claude Code hashes)
        # ``finish()``/``seal()`` let user lines go as they were: no blob stands for them until the next response.
        self.sealed = False
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
        self._blob_hashes: set[str] = set()
        self._after_blob: _Chat | None = None  # the conversation the line before was a request blob of
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
        """Close every open response as it stands and let the held user lines go as they are.
        ``cut_open`` records where each response went: a caller that later reads more of the file may
        find that response grown. A request blob read after this for the lines it let go is skipped."""
        self.seal()
        out: list[tuple[str, Message]] = []
        for chat in self._chats.values():
            if chat.group is not None:
                self.cut_open[chat.conv.key] = len(chat.conv.messages)
            self._release(chat, out)
        return out

    def seal(self) -> None:
        """What ``finish()`` decides of the held user lines, without emitting anything: they stay the
        lines they are (a later blob for them is skipped). A reader re-reading a file calls it where an
        earlier reader finished, so both make the same messages (``transcript_sync``)."""
        for chat in self._chats.values():
            if chat.held:
                chat.sealed = True

    @property
    def replaceable(self) -> int:
        """User lines held that a request blob could still stand for (``seal()`` would change them)."""
        return sum(len(chat.held) for chat in self._chats.values() if not chat.sealed)

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
        """Messages read but not final yet: open responses (which may still grow) and the user lines
        held behind them. ``finish()`` releases them; so do the conversation's next response, a
        request blob and a compact boundary."""
        return sum((chat.group is not None) + len(chat.held) for chat in self._chats.values())

    # ------------------------------------------------------------------ lines

    def _line(self, raw: str | bytes, out: list[tuple[str, Message]]) -> None:
        self.lines_read += 1
        event = jsonl_event(raw, self.cleaned)
        if isinstance(event, tuple):
            self._unreadable(*event)
            return
        if event is None:
            return
        kind = event.get("type")
        following, self._after_blob = self._after_blob, None  # the blobs of one request are consecutive lines
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
        if kind == BLOB:
            self._blob(request_blob(event), following, out)
            return
        if kind == REQUEST:
            self.skipped[kind] += 1
            self._request(event, out)
            return
        if kind in ("user", "assistant"):
            self._unreadable(f"{kind}_without_message", f"a {kind} line without a message object")
        elif kind == "system" and event.get("subtype") == "compact_boundary" and self._seen_boundary(event):
            # Written twice: the boundary is behind the summary already, which waits for its request.
            self.skipped["duplicate"] += 1
            return
        else:
            self.skipped[kind if isinstance(kind, str) and kind else "unknown"] += 1
        chain = self._chain(event)
        if kind == "summary" and nonempty_str(event.get("leafUuid")) and isinstance(event.get("summary"), str):
            self._summaries.append((event["leafUuid"], event["summary"]))
        if kind == "system" and event.get("subtype") == "compact_boundary":
            bounded = self._chat_of_chain.get(chain)
            if bounded is not None:
                self._release(bounded, out)
                bounded.sealed = False
                start = len(bounded.conv.messages)
                if start not in bounded.conv.segment_starts:
                    bounded.conv.segment_starts.append(start)
                bounded.conv.boundary_facts[start] = boundary_facts(event)

    def _seen_boundary(self, event: dict[str, Any]) -> bool:
        """Whether a compaction boundary with this line's uuid was read before (and note it now)."""
        uuid = nonempty_str(event.get("uuid"))
        if uuid is None:
            return False
        if uuid in self._message_uuids:
            return True
        self._message_uuids.add(uuid)
        return False

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
        msg = user_line_message(event, self._timestamp(event))
        content = msg["content"]
        only_results = isinstance(content, list) and bool(content) and all(b["type"] == "tool_result" for b in content)
        if not only_results:  # the response may still add tool calls after a result, not after a prompt
            self._close_group(chat, out)
        chat.held.append(msg)
        chat.held_raw.append(event["message"].get("content"))

    def _assistant(self, chat: _Chat, event: dict[str, Any], out: list[tuple[str, Message]]) -> None:
        body = event["message"]
        message_id = nonempty_str(body.get("id"))
        stamp = self._timestamp(event)
        group = chat.group
        if group is None or message_id is None or group.message_id != message_id:
            self._release(chat, out)
            chat.sealed = False
            group = chat.group = Response(message_id=message_id, first=event, created_at=stamp)
        group.add(event)
        self._note_usage(chat, body, message_id, group.created_at)
        if message_id is None:  # nothing to regroup by: a message of its own
            self._close_group(chat, out)

    def _note_usage(self, chat: _Chat, body: dict[str, Any], message_id: str | None, stamp: str | None) -> None:
        usage, model = body.get("usage"), nonempty_str(body.get("model"))
        if message_id is None or not isinstance(usage, dict) or model == SYNTHETIC_MODEL:
            return
        known = chat.conv.responses.get(message_id)
        chat.conv.responses[message_id] = ResponseUsage(
            response_id=message_id,
            api="anthropic",
            usage=usage,
            model=model or (known.model if known else None),
            created_at=known.created_at if known else stamp,
        )

    def _blob(self, blob: RequestBlob | None, following: _Chat | None, out: list[tuple[str, Message]]) -> None:
        """The user message a request sent stands for the user lines held since the last response.
        Blob lines name no conversation: it is the one holding lines (the main one if several do).
        A request that starts afresh (after Claude Code compacted its context: the summary, the reply
        it keeps, reminders, the prompt) has a blob per message: those after the first, which stands
        for the held lines, follow it as messages of their own. Skipped (and counted): a blob that
        holds no message, repeats a hash (a retry), finds no lines to stand for, or answers other
        tool calls than they do."""
        chat = self._holding()
        seen = blob is not None and blob.hash in self._blob_hashes
        if blob is not None and blob.hash is not None:
            self._blob_hashes.add(blob.hash)
        if blob is not None and not seen and following is not None and not following.held:
            self._emit(following, blob_message(blob, self._last_timestamp), out)
            self._after_blob = following
            return
        if (
            blob is None
            or seen
            or blob.role != "user"
            or chat is None
            or chat.sealed
            or not answers_the_same_calls(chat.held, blob)
        ):
            self.skipped[BLOB] += 1
            return
        self._send(chat, blob, out)
        self._after_blob = chat

    def _request(self, event: dict[str, Any], out: list[tuple[str, Message]]) -> None:
        """A request sent with no blob: Claude Code writes none when the user lines since the last
        response, taken together, are the message it sent (its hash, the ``tail``'s last, says so)."""
        tail = event.get("tail")
        chat = self._holding()
        if chat is None or chat.sealed or len(chat.held) < 2 or not isinstance(tail, list) or not tail:
            return
        content = lines_as_sent(chat.held_raw)
        if sent_hash("user", content) == tail[-1]:
            self._send(chat, RequestBlob(None, content_of(content)), out)

    def _holding(self) -> _Chat | None:
        """The conversation a request line is about: the one holding user lines (main, if several do)."""
        holding = [chat for chat in self._chats.values() if chat.held]
        return holding[0] if len(holding) == 1 else self._chats.get(MAIN)

    def _send(self, chat: _Chat, sent: RequestBlob, out: list[tuple[str, Message]]) -> None:
        """The held user lines become the one message the request sent."""
        lines, chat.held, chat.held_raw = chat.held, [], []
        self._close_group(chat, out)  # a new request: the response before it is complete
        self._emit(chat, merged_user_message(lines, sent), out)

    def _release(self, chat: _Chat, out: list[tuple[str, Message]]) -> None:
        """Emit the open group (if any), then the user lines held behind it."""
        self._close_group(chat, out)
        held, chat.held, chat.held_raw = chat.held, [], []
        for msg in held:
            self._emit(chat, msg, out)

    def _close_group(self, chat: _Chat, out: list[tuple[str, Message]]) -> None:
        group, chat.group = chat.group, None
        if group is not None:
            msg = group.message()
            usage = msg["metadata"].get("usage", {})
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
