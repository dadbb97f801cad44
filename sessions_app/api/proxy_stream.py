"""Reading a streamed answer as it passes through the proxy: the bytes go to the caller untouched; a
copy is fed here, which puts the model's message back together from its server-sent events (the
same message a non-streamed answer holds, in Anthropic's shape) for the proxy to record when the
stream ends. Anthropic's Messages events, and OpenAI's ``chat.completion.chunk`` events."""

from __future__ import annotations

import json
from typing import Any

from compaction.transcripts.openai import completion_as_message


class _Events:
    """Feed it a stream's bytes in any pieces; each event's ``data`` goes to ``_data``."""

    def __init__(self) -> None:
        self._buffer = b""
        self.complete = False
        self.error: dict[str, Any] | None = None

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while True:
            # Events end with a blank line; the APIs send \n, a relay may send \r\n.
            cut = min((i for i in (self._buffer.find(b"\n\n"), self._buffer.find(b"\r\n\r\n")) if i >= 0), default=-1)
            if cut < 0:
                return
            block, self._buffer = self._buffer[:cut], self._buffer[cut:].lstrip(b"\r\n")
            data = b"\n".join(
                line[5:].lstrip() for line in block.replace(b"\r\n", b"\n").split(b"\n") if line.startswith(b"data:")
            )
            if data:
                self._data(data)

    def _data(self, data: bytes) -> None:
        raise NotImplementedError


class MessageAccumulator(_Events):
    """Anthropic's events: ``message`` is the message so far, ``complete`` once ``message_stop``
    arrived, ``error`` the body of an ``error`` event if one came."""

    def __init__(self) -> None:
        super().__init__()
        self.message: dict[str, Any] = {}
        self._json: dict[int, str] = {}  # a tool_use block's input as it arrives, by block index

    def _data(self, data: bytes) -> None:
        try:
            event = json.loads(data)
        except (ValueError, RecursionError):
            return
        if isinstance(event, dict):
            self._apply(event)

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        content = self.message.setdefault("content", []) if self.message else []
        if kind == "message_start" and isinstance(event.get("message"), dict):
            self.message = {**event["message"], "content": list(event["message"].get("content") or [])}
        elif kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            content.append(dict(event["content_block"]))
        elif kind == "content_block_delta" and isinstance(event.get("delta"), dict) and content:
            self._delta(event.get("index"), event["delta"], content)
        elif kind == "content_block_stop":
            self._close(event.get("index"), content)
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict):
                self.message.update({k: v for k, v in delta.items() if k in ("stop_reason", "stop_sequence")})
            if isinstance(event.get("usage"), dict):  # cumulative figures: they replace the start's
                self.message["usage"] = {**(self.message.get("usage") or {}), **event["usage"]}
            if isinstance(event.get("context_management"), dict):  # the provider's context editing
                self.message["context_management"] = event["context_management"]
        elif kind == "message_stop":
            self.complete = True
        elif kind == "error":
            self.error = event

    def _delta(self, index: Any, delta: dict[str, Any], content: list[dict[str, Any]]) -> None:
        block = content[index] if isinstance(index, int) and 0 <= index < len(content) else content[-1]
        match delta.get("type"):
            case "text_delta":
                block["text"] = block.get("text", "") + str(delta.get("text", ""))
            case "input_json_delta":
                position = index if isinstance(index, int) else len(content) - 1
                self._json[position] = self._json.get(position, "") + str(delta.get("partial_json", ""))
            case "thinking_delta":
                block["thinking"] = block.get("thinking", "") + str(delta.get("thinking", ""))
            case "signature_delta":
                block["signature"] = str(delta.get("signature", ""))
            case "compaction_delta":  # a provider's compaction summary
                block["content"] = (block.get("content") or "") + str(delta.get("content") or "")
                if delta.get("encrypted_content") is not None:
                    block["encrypted_content"] = delta["encrypted_content"]
            case "citations_delta":
                block.setdefault("citations", []).append(delta.get("citation"))

    def _close(self, index: Any, content: list[dict[str, Any]]) -> None:
        if not isinstance(index, int) or index not in self._json or not 0 <= index < len(content):
            return
        raw = self._json.pop(index)
        try:
            content[index]["input"] = json.loads(raw) if raw else {}
        except ValueError:
            content[index]["input"] = {"_partial_json": raw}


class ChunkAccumulator(_Events):
    """OpenAI's ``chat.completion.chunk`` events: ``message`` is the first choice so far as an
    Anthropic-shaped message (a request with ``n`` > 1 streams several; the plain answer's first is
    the one recorded too), ``complete`` once it finished (its ``finish_reason``, or ``[DONE]``: some
    compatible servers send only one of them), ``error`` an error body if one came instead of a chunk."""

    def __init__(self) -> None:
        super().__init__()
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
                "function": {"name": c.get("name"), "arguments": c.get("arguments", "")},
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
        for name in ("id", "model", "usage"):
            if chunk.get(name) is not None:
                self._completion[name] = chunk[name]
        self._completion.setdefault("id", None)
        choices: list[Any] = chunk["choices"] if isinstance(chunk.get("choices"), list) else []
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        delta: dict[str, Any] = choice["delta"] if isinstance(choice.get("delta"), dict) else {}
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
            known["arguments"] = known.get("arguments", "") + function["arguments"]
