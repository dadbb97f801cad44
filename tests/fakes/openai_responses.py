"""OpenAI's Responses API in the fake OpenAI server (``tests/fakes/openai_server.py``), as the ``openai``
SDK and the Codex CLI speak it:

    with FakeOpenAI() as server:
        server.responses.queue_reply([reasoning("Look first."), function_call("exec_command", {"cmd": "ls"})])
        client.responses.create(model="gpt-5.5", input="Hi", stream=True)

``POST …/v1/responses`` answers the next queued reply (FIFO), else what the responder set with
``set_responder(body -> items)`` decides, else ``DEFAULT_REPLY``: a ``response`` object, or with
``"stream": true`` the server-sent events the API streams (``response.created``, ``response.in_progress``,
each item's ``output_item.added`` / deltas / ``output_item.done``, ``response.completed``). ``usage``:
``input_tokens`` is ``count_input_tokens(body)`` (ceil(bytes / 4) of the canonical JSON of the
instructions, input and tools), ``cached_tokens`` the part of it the last request with the same
``prompt_cache_key`` began with, ``output_tokens`` ceil(bytes / 4) of what the reply says.
``context_window`` refuses an input over it with 400 ``context_length_exceeded`` in OpenAI's words.
``POST …/v1/responses/compact`` answers the input's user messages and one ``compaction`` item whose
``encrypted_content`` is ``compaction_summary`` (base64); so does, with the item alone, a request
whose input ends with ``{"type": "compaction_trigger"}`` (Codex's remote compaction v2). ``compactions``
counts both.
Requests are recorded by the server (``FakeOpenAI.requests``: path, headers, body); the ``response``
objects answered in ``answered``.
"""

from __future__ import annotations

import base64
import itertools
import json
import math
import secrets
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

DEFAULT_REPLY = "This is the default reply of the fake Responses API."
COMPACTION_SUMMARY = "Summary of the conversation so far, made by the fake Responses API."
CONTEXT_EXCEEDED = "Your input exceeds the context window of this model. Please adjust your input and try again."
_PIECE = 12  # characters of text, arguments or input per delta
Item = dict[str, Any]
Responder = Callable[[Mapping[str, Any]], Sequence[Mapping[str, Any]]]


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def message(text: str, *, phase: str | None = None) -> Item:
    item: Item = {"type": "message", "role": "assistant", "status": "completed",
                  "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}  # fmt: skip
    if phase is not None:  # Codex's channel: "commentary" while it works, "final_answer" at the end
        item["phase"] = phase
    return item


def reasoning(summary: str, *, encrypted: str | None = None) -> Item:
    """A thought: its summary in clear, its content opaque (``encrypted_content``, as ``include`` asks)."""
    content = encrypted or base64.b64encode(f"thought: {summary}".encode()).decode()
    return {"type": "reasoning", "summary": [{"type": "summary_text", "text": summary}], "encrypted_content": content}


def function_call(name: str, arguments: Mapping[str, Any] | str, *, call_id: str | None = None) -> Item:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"type": "function_call", "status": "completed", "name": name, "arguments": text,
            "call_id": call_id or _id("call")}  # fmt: skip


def custom_tool_call(name: str, tool_input: str, *, call_id: str | None = None) -> Item:
    """A call of a freeform tool (Codex's ``apply_patch``): its input is text, not JSON."""
    return {"type": "custom_tool_call", "status": "completed", "name": name, "input": tool_input,
            "call_id": call_id or _id("call")}  # fmt: skip


def compaction(summary: str) -> Item:
    """What compacting answers: the conversation so far as one opaque item (here its summary, in base64)."""
    return {"type": "compaction", "encrypted_content": base64.b64encode(summary.encode()).decode()}


def asks_to_compact(body: Mapping[str, Any]) -> bool:
    """A request whose input ends with ``compaction_trigger``: Codex's remote compaction (v2) through
    ``POST /v1/responses``; it expects exactly one ``compaction`` item back."""
    items = body.get("input")
    last = items[-1] if isinstance(items, list) and items else None
    return isinstance(last, dict) and last.get("type") == "compaction_trigger"


def _tokens(value: object) -> int:
    return math.ceil(len(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()) / 4)


def count_input_tokens(body: Mapping[str, Any]) -> int:
    return _tokens({"instructions": body.get("instructions"), "input": body.get("input"), "tools": body.get("tools")})


def error(status: int, message: str, *, code: str | None = None, param: str | None = None) -> tuple[int, Item]:
    kind = {401: "invalid_request_error", 404: "invalid_request_error", 429: "rate_limit_error"}.get(status)
    kind = kind or ("invalid_request_error" if status < 500 else "server_error")
    return status, {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _said(item: Mapping[str, Any]) -> str:
    if item["type"] == "message":
        return "".join(part.get("text", "") for part in item["content"])
    if item["type"] == "reasoning":
        return "".join(part["text"] for part in item["summary"])
    return str(item.get("arguments") or item.get("input") or "")


class ResponsesAPI:
    """What the fake's Responses API answers; thread-safe, shared by the server's handler threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replies: list[list[Item]] = []
        self._errors: list[tuple[int, Item]] = []
        self._responder: Responder | None = None
        self._cache: dict[str, list[Any]] = {}  # prompt_cache_key -> the input last sent with it
        self.context_window: int | None = None
        self.compaction_summary = COMPACTION_SUMMARY
        self.compactions = 0
        self.answered: list[Item] = []  # every ``response`` object answered, in order

    def queue_reply(self, items: Sequence[Mapping[str, Any]]) -> None:
        with self._lock:
            self._replies.append([dict(i) for i in items])

    def queue_text(self, text: str) -> None:
        self.queue_reply([message(text)])

    def queue_error(self, status: int, message: str = "Injected by the fake Responses API", **kw: str) -> None:
        with self._lock:
            self._errors.append(error(status, message, **kw))

    def set_responder(self, responder: Responder | None) -> None:
        self._responder = responder

    def _refusal(self, body: Mapping[str, Any]) -> tuple[int, Item] | None:
        if self._errors:
            return self._errors.pop(0)
        if not isinstance(body.get("input"), (list, str)):
            return error(400, "Missing required parameter: 'input'.", code="missing_required_parameter", param="input")
        if not isinstance(body.get("model"), str):
            return error(400, "Missing required parameter: 'model'.", code="missing_required_parameter", param="model")
        if self.context_window is not None and count_input_tokens(body) > self.context_window:
            return error(400, CONTEXT_EXCEEDED, code="context_length_exceeded", param="input")
        return None

    def _cached_tokens(self, body: Mapping[str, Any]) -> int:
        key, items = body.get("prompt_cache_key"), body.get("input")
        if not isinstance(key, str) or not isinstance(items, list):
            return 0
        with self._lock:
            before, self._cache[key] = self._cache.get(key, []), items
        shared = list(itertools.takewhile(lambda pair: pair[0] == pair[1], zip(before, items, strict=False)))
        return _tokens([a for a, _ in shared]) if shared else 0

    def answer(self, body: Mapping[str, Any]) -> tuple[int, Item]:
        """The ``response`` object for ``body``, or an error in OpenAI's format."""
        with self._lock:
            refusal = self._refusal(body)
            if refusal is not None:
                return refusal
            queued = self._replies.pop(0) if self._replies else None
        if queued is None and self._responder is not None:
            queued = [dict(i) for i in self._responder(body)]
        if queued is None:
            queued = [compaction(self.compaction_summary)] if asks_to_compact(body) else [message(DEFAULT_REPLY)]
        if asks_to_compact(body):
            with self._lock:
                self.compactions += 1
        prefixes = {"message": "msg", "reasoning": "rs", "function_call": "fc", "custom_tool_call": "ctc",
                    "compaction": "cmp"}  # fmt: skip
        output = [{"id": _id(prefixes.get(i["type"], "item")), **i} for i in queued]
        prompt, cached = count_input_tokens(body), self._cached_tokens(body)
        thought = sum(_tokens(_said(i)) for i in output if i["type"] == "reasoning")
        said = max(1, sum(math.ceil(len(_said(i).encode()) / 4) for i in output))
        response = {
            "id": _id("resp"), "object": "response", "created_at": int(time.time()), "status": "completed",
            "model": body["model"], "output": output, "error": None, "incomplete_details": None,
            "instructions": body.get("instructions"), "tools": body.get("tools") or [],
            "tool_choice": body.get("tool_choice", "auto"),
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "store": body.get("store", True), "reasoning": body.get("reasoning"), "metadata": {},
            "usage": {
                "input_tokens": prompt, "input_tokens_details": {"cached_tokens": min(cached, prompt)},
                "output_tokens": said, "output_tokens_details": {"reasoning_tokens": min(thought, said)},
                "total_tokens": prompt + said,
            },
        }  # fmt: skip
        with self._lock:
            self.answered.append(response)
        return 200, response

    def compact(self, body: Mapping[str, Any]) -> tuple[int, Item]:
        """``POST /v1/responses/compact``: the user's messages kept, the rest one opaque compaction item."""
        with self._lock:
            refusal = self._refusal(body)
            if refusal is not None:
                return refusal
            self.compactions += 1
        items = body["input"] if isinstance(body["input"], list) else [_user(body["input"])]
        kept = [i for i in items if isinstance(i, dict) and i.get("type") == "message" and i.get("role") == "user"]
        output = [*kept, {"id": _id("cmp"), **compaction(self.compaction_summary)}]
        prompt, said = count_input_tokens(body), _tokens(output)
        return 200, {"id": _id("resp"), "object": "response.compaction", "created_at": int(time.time()),
                     "output": output, "usage": {"input_tokens": prompt, "output_tokens": said,
                                                 "total_tokens": prompt + said}}  # fmt: skip


def _user(text: str) -> Item:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def stream_events(response: Mapping[str, Any]) -> list[Item]:
    """A finished ``response`` as the events that stream it, numbered by ``sequence_number``."""
    head = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[Item] = [{"type": "response.created", "response": head},
                          {"type": "response.in_progress", "response": head}]  # fmt: skip
    for index, item in enumerate(response["output"]):
        at = {"output_index": index, "item_id": item["id"]}
        events.append({"type": "response.output_item.added", "output_index": index, "item": _opened(item)})
        if item["type"] == "message":
            for n, part in enumerate(item["content"]):
                empty = {**part, "text": ""}
                events.append({"type": "response.content_part.added", **at, "content_index": n, "part": empty})
                events += [{"type": "response.output_text.delta", **at, "content_index": n, "delta": piece,
                            "logprobs": []} for piece in _pieces(part["text"])]  # fmt: skip
                events.append({"type": "response.output_text.done", **at, "content_index": n, "text": part["text"],
                               "logprobs": []})  # fmt: skip
                events.append({"type": "response.content_part.done", **at, "content_index": n, "part": part})
        elif item["type"] == "reasoning":
            for n, part in enumerate(item["summary"]):
                empty = {**part, "text": ""}
                opened = {"type": "response.reasoning_summary_part.added", **at, "summary_index": n, "part": empty}
                events.append(opened)
                events += [{"type": "response.reasoning_summary_text.delta", **at, "summary_index": n, "delta": piece}
                           for piece in _pieces(part["text"])]  # fmt: skip
                events.append({"type": "response.reasoning_summary_text.done", **at, "summary_index": n,
                               "text": part["text"]})  # fmt: skip
                events.append({"type": "response.reasoning_summary_part.done", **at, "summary_index": n, "part": part})
        elif item["type"] in ("function_call", "custom_tool_call"):
            field, kind = ("arguments", "function_call_arguments") if item["type"] == "function_call" else (
                "input", "custom_tool_call_input")  # fmt: skip
            events += [{"type": f"response.{kind}.delta", **at, "delta": piece} for piece in _pieces(item[field])]
            events.append({"type": f"response.{kind}.done", **at, field: item[field]})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return [{**event, "sequence_number": n} for n, event in enumerate(events)]


_EMPTY: dict[str, Item] = {"message": {"content": []}, "reasoning": {"summary": []},
                           "function_call": {"arguments": ""}, "custom_tool_call": {"input": ""}}  # fmt: skip


def _opened(item: Mapping[str, Any]) -> Item:
    """An item as ``output_item.added`` shows it: nothing said yet."""
    opened = {**item, **_EMPTY.get(item["type"], {})}
    return opened if item["type"] == "reasoning" else {**opened, "status": "in_progress"}


def _pieces(text: str) -> list[str]:
    return [text[i : i + _PIECE] for i in range(0, len(text), _PIECE)]


def is_responses_path(path: str) -> bool:
    return path.split("?")[0].rstrip("/").endswith(("/v1/responses", "/v1/responses/compact"))


def serve(handler: BaseHTTPRequestHandler, api: ResponsesAPI, headers: Mapping[str, str], body: Any) -> None:
    """Answers one request to ``…/v1/responses`` or ``…/v1/responses/compact`` on ``handler``."""
    if not headers.get("authorization", "").lower().startswith("bearer "):
        return _json(handler, *error(401, "You didn't provide an API key.", code="missing_api_key"))
    if not isinstance(body, dict):
        return _json(handler, *error(400, "We could not parse the JSON body of your request.", code="invalid_json"))
    if handler.path.split("?")[0].rstrip("/").endswith("/compact"):
        return _json(handler, *api.compact(body))
    status, response = api.answer(body)
    if status != 200 or body.get("stream") is not True:
        return _json(handler, status, response)
    handler.send_response(200)
    handler.send_header("content-type", "text/event-stream")
    handler.send_header("transfer-encoding", "chunked")
    handler.send_header("x-request-id", f"req_{secrets.token_hex(6)}")
    handler.end_headers()
    for event in stream_events(response):
        data = f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()
        handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        handler.wfile.flush()
    handler.wfile.write(b"0\r\n\r\n")


def _json(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    data = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("content-type", "application/json")
    handler.send_header("content-length", str(len(data)))
    handler.send_header("x-request-id", f"req_{secrets.token_hex(6)}")
    handler.end_headers()
    handler.wfile.write(data)
