"""Reading a streamed answer as it passes through the proxy: the bytes go to the caller untouched; a
copy is fed here, which puts the model's message back together from its server-sent events (the
same message a non-streamed answer holds, in Anthropic's shape) for the proxy to record when the
stream ends. Anthropic's Messages events, OpenAI's ``chat.completion.chunk`` events and its Responses
API's events."""

from __future__ import annotations

import json
import re
from typing import Any

from compaction.transcripts.openai import completion_as_message
from compaction.transcripts.responses import response_as_message

_EVENT_END = re.compile(rb"\r?\n\r?\n[\r\n]*")  # events end with a blank line: \n from the APIs, \r\n from a relay


class _Events:
    """Feed it a stream's bytes in any pieces; each event's ``data`` goes to ``_data``. Past ``limit``
    bytes of events, ``truncated``: the events are still read (the usage, the end), but what they add to the
    message's content is not kept (``_grows`` says so)."""

    def __init__(self, limit: int | None = None) -> None:
        self._buffer = b""
        self._limit, self._read = limit, 0  # bytes of the events read so far
        self.complete = False
        self.truncated = False
        self.error: dict[str, Any] | None = None

    def feed(self, data: bytes) -> None:
        buffer = self._buffer + data if self._buffer else data
        start = 0
        while (end := _EVENT_END.search(buffer, start)) is not None:
            self._read += end.end() - start
            block, start = buffer[start : end.start()], end.end()
            data = b"\n".join(
                line[5:].lstrip() for line in block.replace(b"\r\n", b"\n").split(b"\n") if line.startswith(b"data:")
            )
            if data:
                self._data(data)
        self._buffer = buffer[start:]

    def _grows(self) -> bool:
        """Whether content that arrives now is kept (not past the limit)."""
        if self._limit is not None and self._read > self._limit:
            self.truncated = True
        return not self.truncated

    def _data(self, data: bytes) -> None:
        raise NotImplementedError


class MessageAccumulator(_Events):
    """Anthropic's events: ``message`` is the message so far, ``complete`` once ``message_stop``
    arrived, ``error`` the body of an ``error`` event if one came. A block's text arrives in small
    pieces: they are kept as lists and joined when the message is read."""

    def __init__(self, limit: int | None = None) -> None:
        super().__init__(limit)
        self._message: dict[str, Any] = {}
        self._pieces: dict[tuple[int, str], list[str]] = {}  # (block index, field) → its text as it arrives
        self._json: dict[int, list[str]] = {}  # a tool_use block's input as it arrives, by block index

    @property
    def message(self) -> dict[str, Any]:
        if not self._message:
            return {}
        content = [dict(block) for block in self._message.get("content", [])]
        for (position, field), pieces in self._pieces.items():
            content[position][field] = (content[position].get(field) or "") + "".join(pieces)
        return {**self._message, "content": content}

    @property
    def raw(self) -> dict[str, Any]:
        """The message's own fields as far as they came (its model, its usage), its content aside."""
        return self._message

    def _data(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):
            return
        if isinstance(event, dict):
            self._apply(event)

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        content = self._message.setdefault("content", []) if self._message else []
        if kind == "message_start" and isinstance(event.get("message"), dict):
            self._message = {**event["message"], "content": list(event["message"].get("content") or [])}
            self._pieces, self._json = {}, {}
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict) and self._grows():
            content.append(dict(event["content_block"]))
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict) and content and self._grows():
            self._delta(event.get("index"), event["delta"], content)
        elif kind == "content_block_stop":
            self._close(event.get("index"), content)
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict):
                self._message.update({k: v for k, v in delta.items() if k in ("stop_reason", "stop_sequence")})
            if isinstance(event.get("usage"), dict):  # cumulative figures: they replace the start's
                self._message["usage"] = {**(self._message.get("usage") or {}), **event["usage"]}
            if isinstance(event.get("context_management"), dict):  # the provider's context editing
                self._message["context_management"] = event["context_management"]
        elif kind == "message_stop":
            self.complete = True
        elif kind == "error":
            self.error = event

    def _delta(self, index: Any, delta: dict[str, Any], content: list[dict[str, Any]]) -> None:
        at = index if isinstance(index, int) and 0 <= index < len(content) else len(content) - 1
        block = content[at]
        match delta.get("type"):
            case "text_delta":
                self._pieces.setdefault((at, "text"), []).append(str(delta.get("text", "")))
            case "input_json_delta":
                position = index if isinstance(index, int) else len(content) - 1
                self._json.setdefault(position, []).append(str(delta.get("partial_json", "")))
            case "thinking_delta":
                self._pieces.setdefault((at, "thinking"), []).append(str(delta.get("thinking", "")))
            case "signature_delta":
                block["signature"] = str(delta.get("signature", ""))
            case "compaction_delta":  # a provider's compaction summary
                self._pieces.setdefault((at, "content"), []).append(str(delta.get("content") or ""))
                if delta.get("encrypted_content") is not None:
                    block["encrypted_content"] = delta["encrypted_content"]
            case "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))

    def _close(self, index: Any, content: list[dict[str, Any]]) -> None:
        if not isinstance(index, int) or index not in self._json or not 0 <= index < len(content):
            return
        raw = "".join(self._json.pop(index))
        try:
            content[index]["input"] = json.loads(raw) if raw else {}
        except ValueError:
            content[index]["input"] = {"_partial_json": raw}


class ChunkAccumulator(_Events):
    """OpenAI's ``chat.completion.chunk`` events: ``message`` is the first choice so far as an
    Anthropic-shaped message (a request with ``n`` > 1 streams several; the plain answer's first is
    the one recorded too), ``complete`` once it finished (its ``finish_reason``, or ``[DONE]``: some
    compatible servers send only one of them), ``error`` an error body if one came instead of a chunk."""

    def __init__(self, limit: int | None = None) -> None:
        super().__init__(limit)
        self._completion: dict[str, Any] = {}
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}
        self._finish: Any = None

    @property
    def message(self) -> dict[str, Any]:
        if not self._completion:
            return {}
        calls = [
            {
                "id": c.get("id"),
                "type": "function",
                "function": {"name": c.get("name"), "arguments": "".join(c.get("arguments", []))},
            }
            for _, c in sorted(self._calls.items())
        ]
        said: dict[str, Any] = {"role": "assistant", "content": "".join(self._text) or None}
        if self._refusal:
            said["refusal"] = "".join(self._refusal)
        if calls:
            said["tool_calls"] = calls
        choice = {"index": 0, "message": said, "finish_reason": self._finish}
        return completion_as_message({**self._completion, "choices": [choice]}) or {}

    @property
    def raw(self) -> dict[str, Any]:
        """The completion's own fields as far as they came (its model, usage, service tier)."""
        return self._completion

    def _data(self, data: bytes) -> None:
        if data.strip() == b"[DONE]":
            self.complete = True
            return
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            return
        if not isinstance(chunk, dict):
            return
        if isinstance(chunk.get("error"), dict):
            self.error = chunk
            return
        for name in ("id", "model", "usage", "service_tier"):
            if chunk.get(name) is not None:
                self._completion[name] = chunk[name]
        self._completion.setdefault("id", None)
        choices: list[Any] = chunk["choices"] if isinstance(chunk.get("choices"), list) else []
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta: dict[str, Any] = choice["delta"] if isinstance(choice.get("delta"), dict) and self._grows() else {}
        for said, kept in ((delta.get("content"), self._text), (delta.get("refusal"), self._refusal)):
            if isinstance(said, str):
                kept.append(said)
        for call in delta.get("tool_calls") or []:
            if isinstance(call, dict) and isinstance(call.get("index"), int):
                self._call(call)
        if choice.get("finish_reason") is not None:
            self._finish = choice["finish_reason"]
            self.complete = True

    def _call(self, call: dict[str, Any]) -> None:
        known = self._calls.setdefault(call["index"], {})
        if isinstance(call.get("id"), str):
            known["id"] = call["id"]
        function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
        if isinstance(function.get("name"), str):
            known["name"] = function["name"]
        if isinstance(function.get("arguments"), str):
            known.setdefault("arguments", []).append(function["arguments"])


class ResponseAccumulator(_Events):
    """OpenAI's Responses events: ``message`` is the response so far as an Anthropic-shaped message
    (``compaction.transcripts.responses``): the whole response its last event carries
    (``response.completed``, ``.incomplete``, ``.failed``), else the items that arrived, each whole
    once its ``response.output_item.done`` came, its text and arguments so far until then. ``complete``
    once the response ended, ``error`` the body of an ``error`` event or a failed response."""

    _ENDS = ("response.completed", "response.incomplete", "response.failed")
    _PIECES = {
        "response.output_text.delta": "text",
        "response.function_call_arguments.delta": "arguments",
        "response.custom_tool_call_input.delta": "input",
    }

    def __init__(self, limit: int | None = None) -> None:
        super().__init__(limit)
        self._response: dict[str, Any] = {}
        self._items: dict[int, dict[str, Any]] = {}
        self._pieces: dict[tuple[int, int, str], list[str]] = {}  # (output index, content index, field) → pieces

    @property
    def message(self) -> dict[str, Any]:
        if not self._response:
            return {}
        output = self._response.get("output")
        if not self._ended or not isinstance(output, list):
            output = [self._item(i) for i in sorted(self._items)]
        return response_as_message({**self._response, "output": output}) or {}

    @property
    def raw(self) -> dict[str, Any]:
        """The response's own fields as far as they came (its model, usage, service tier)."""
        return self._response

    @property
    def _ended(self) -> bool:
        return self.complete and not self.truncated

    def _item(self, index: int) -> dict[str, Any]:
        item = dict(self._items[index])
        for (at, part, field), pieces in self._pieces.items():
            if at != index:
                continue
            if field == "text":
                content = [dict(p) if isinstance(p, dict) else p for p in item.get("content") or []]
                while len(content) <= part:
                    content.append({"type": "output_text", "text": ""})
                if isinstance(content[part], dict):
                    content[part]["text"] = (content[part].get("text") or "") + "".join(pieces)
                item["content"] = content
            else:
                item[field] = (item.get(field) or "") + "".join(pieces)
        return item

    def _data(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):
            return
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        response = event.get("response")
        if kind in ("response.created", "response.in_progress") and isinstance(response, dict):
            self._response = {**self._response, **response}
        elif kind in self._ENDS and isinstance(response, dict):
            kept = response if self._grows() else {k: v for k, v in response.items() if k != "output"}
            self._response = {**self._response, **kept}
            self.complete = True
            if kind == "response.failed":
                self.error = {"type": "error", "error": response.get("error")}
        elif kind == "error":
            self.error = event
        elif isinstance(event.get("output_index"), int) and self._grows():
            self._output(kind, event)

    def _output(self, kind: Any, event: dict[str, Any]) -> None:
        index: int = event["output_index"]
        item = event.get("item")
        if kind == "response.output_item.added" and isinstance(item, dict):
            self._items[index] = dict(item)
        elif kind == "response.output_item.done" and isinstance(item, dict):
            self._items[index] = dict(item)
            self._pieces = {key: p for key, p in self._pieces.items() if key[0] != index}
        elif kind in self._PIECES and index in self._items and isinstance(event.get("delta"), str):
            part: int = event["content_index"] if isinstance(event.get("content_index"), int) else 0
            self._pieces.setdefault((index, part, self._PIECES[kind]), []).append(event["delta"])
