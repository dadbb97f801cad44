"""Codex session files (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``) → canonical messages,
incrementally (``CodexReader``); ``read`` (the one-shot import) feeds the whole file to one reader.

Each line is ``{"timestamp", "type", "payload"}``. ``response_item`` lines are the conversation: the
Responses API items Codex sent and received, read as the proxy reads a request of them
(``responses.ItemReader``), so an import of the file equals the proxy's recording of the thread.
``session_meta`` names the thread (its id is the session's external id, the ``session-id`` header
Codex sends) and holds the base instructions Codex sends as its first developer message: the start of
the system prompt. ``turn_context`` names the model. ``token_usage_record`` is one response's usage.
``compacted`` is Codex compacting its history: the ``replacement_history`` its next requests start
over from follows, its summary a compaction boundary (the response that wrote the summary, marked
``compaction_output``, is no turn of the conversation: the proxy records none of that request).
``event_msg`` lines repeat what the items say for Codex's UI, except the end of a turn
(``task_complete``, ``turn_aborted``), which makes the model's last message final; they and unknown
kinds are skipped, never fatal.

Feeding the file in any chunking gives what reading it whole gives: a message is final once an item
of the other side, a turn's end or a compaction comes (``held_back`` counts the one still open),
and nothing final changes after.
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
    UsagePoint,
    iso_or_none,
    jsonl_event,
    nonempty_str,
)
from .responses import ItemReader, holds_a_compaction, is_compact_summary

FORMAT = "codex"
_TURN_ENDS = ("task_complete", "turn_aborted")
_META = ("cwd", "cli_version", "originator", "source", "model_provider")


def read(text: str) -> Transcript:
    reader = CodexReader()
    reader.feed(text.split("\n"))
    reader.finish()
    return Transcript(
        format=FORMAT, conversations=reader.conversations, skipped=dict(reader.skipped), cleaned=dict(reader.cleaned)
    )


class CodexReader:
    """Reads a Codex rollout a chunk of complete lines at a time. ``feed(lines)`` returns the
    ``(conversation key, message)`` of every message that became final; ``finish()`` the rest."""

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()
        self.cleaned: Counter[str] = Counter()
        self.unreadable: list[tuple[int, str]] = []  # (line number, why)
        self.cut_open: dict[str, int] = {}  # conversation -> index of the message ``finish()`` cut off
        self.lines_read = 0
        self.conv = Conversation(key="main", metadata={"source": "codex"})
        self._items = ItemReader(self.conv, skipped=self.skipped)
        self._instructions_taken = False
        self._emitted = 0

    def feed(self, lines: Iterable[str] | str | bytes) -> list[tuple[str, Message]]:
        if isinstance(lines, bytes | bytearray):
            lines = lines.decode("utf-8", errors="replace")
        if isinstance(lines, str):
            lines = lines.split("\n")
        for line in lines:
            self._line(line)
        return self._final()

    def finish(self) -> list[tuple[str, Message]]:
        """Close the open message as it stands; ``cut_open`` says where it is (a later read of more of
        the file may find it grown)."""
        if self._items.open:
            self.cut_open[self.conv.key] = len(self.conv.messages)
        self._items.close()
        return self._final()

    def seal(self) -> None:
        """Nothing a later line could stand in for is held (a ClaudeCodeReader's user lines are)."""

    replaceable = 0

    @property
    def held_back(self) -> int:
        return int(self._items.open)

    @property
    def conversations(self) -> list[Conversation]:
        return [self.conv] if self.conv.messages else []

    def _final(self) -> list[tuple[str, Message]]:
        done = self.conv.messages[self._emitted :]
        self._emitted = len(self.conv.messages)
        return [(self.conv.key, m) for m in done]

    def _line(self, raw: str | bytes) -> None:
        self.lines_read += 1
        event = jsonl_event(raw, self.cleaned)
        if isinstance(event, tuple):
            self._unreadable(*event)
            return
        if event is None:
            return
        kind, payload = event.get("type"), event.get("payload")
        if not isinstance(payload, dict):
            self.skipped[kind if isinstance(kind, str) and kind else "no_payload"] += 1
            return
        if kind == "response_item":
            if isinstance(event.get("metadata"), dict) and event["metadata"].get("compaction_output") is True:
                self.skipped["compaction_output"] += 1  # the summary a compaction asked for: in ``compacted``
                return
            self._item(payload, event.get("timestamp"))
        elif kind == "session_meta":
            self._meta(payload)
        elif kind == "turn_context":
            self.conv.model = nonempty_str(payload.get("model")) or self.conv.model
        elif kind == "token_usage_record":
            self._usage(payload, event.get("timestamp"))
        elif kind == "compacted":
            self._compacted(payload, event.get("timestamp"))
        elif kind == "event_msg" and payload.get("type") in _TURN_ENDS:
            self._items.close()
        else:
            self.skipped[kind if isinstance(kind, str) and kind else "unknown"] += 1

    def _item(self, item: dict[str, Any], timestamp: Any) -> None:
        self._items.add(item, iso_or_none(timestamp))

    def _meta(self, meta: dict[str, Any]) -> None:
        """The thread's id and base instructions (the first ``session_meta``; a resumed thread's file
        repeats it)."""
        if self.conv.external_id is None:
            self.conv.external_id = nonempty_str(meta.get("id")) or nonempty_str(meta.get("session_id"))
        for name in _META:
            if isinstance(meta.get(name), str):
                self.conv.metadata.setdefault(name, meta[name])
        base = meta.get("base_instructions")
        text = base.get("text") if isinstance(base, dict) else base
        if not self._instructions_taken and isinstance(text, str) and text:
            self._instructions_taken = self._items.instructions_first(text)

    def _usage(self, record: dict[str, Any], timestamp: Any) -> None:
        usage = record.get("usage")
        if not isinstance(usage, dict) or not isinstance(usage.get("input_tokens"), int):
            return
        # A record without a response id is a response of its own, named by its line.
        response = nonempty_str(record.get("response_id")) or f"line-{self.lines_read}"
        known = self.conv.responses.get(response)
        self.conv.responses[response] = ResponseUsage(
            response_id=response,
            api="codex",
            usage=usage,
            model=self.conv.model,
            created_at=known.created_at if known else iso_or_none(timestamp),
        )
        # The response's message: the open one, or the last final one (a turn's end came first).
        index = len(self.conv.messages) - (0 if self._items.open else 1)
        output = usage.get("output_tokens")
        self.conv.usage_points.append(
            UsagePoint(
                message_index=max(index, 0),
                context_tokens=usage["input_tokens"],
                output_tokens=output if isinstance(output, int) else 0,
                request_id=nonempty_str(record.get("response_id")),
            )
        )

    def _compacted(self, payload: dict[str, Any], timestamp: Any) -> None:
        """Codex replaced its history: its next requests start over from ``replacement_history`` (the
        user's messages, then the summary it asked its model for, or the provider's opaque compaction
        item), read as the proxy reads such a request. The summary message, flagged
        ``is_compact_summary``, is the compaction's boundary: what came before it leaves the context
        behind a checkpoint of its text (``services.boundaries``); an opaque item, a provider's
        compaction whose summary only it can read, the same with a note saying so."""
        history = payload.get("replacement_history")
        if not isinstance(history, list):
            self.skipped["compacted_without_history"] += 1
            return
        self._items.restart()
        first = len(self.conv.messages)
        when = iso_or_none(timestamp)
        for item in history:
            self._items.add(item, when)
        self._items.close()
        for index in range(first, len(self.conv.messages)):
            message = self.conv.messages[index]
            if is_compact_summary(message):
                message["metadata"]["is_compact_summary"] = True
            if is_compact_summary(message) or holds_a_compaction(message):
                self.conv.segment_starts.append(index)
                self.conv.boundary_facts[index] = {"trigger": "codex"}
                break

    def _unreadable(self, kind: str, why: str) -> None:
        self.skipped[kind] += 1
        self.unreadable.append((self.lines_read, why))
