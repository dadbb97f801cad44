"""Which reader reads which format, by the name callers give (``FORMATS``)."""

from __future__ import annotations

from collections.abc import Callable

from . import anthropic, claude_code, codex, openai
from .base import Transcript, TranscriptError, decode

READERS: dict[str, Callable[[str], Transcript]] = {
    claude_code.FORMAT: claude_code.read,
    openai.FORMAT: openai.read,
    anthropic.FORMAT: anthropic.read,
    codex.FORMAT: codex.read,
}
FORMATS = tuple(READERS)


def read_transcript(data: bytes | str, fmt: str) -> Transcript:
    """Parse a whole transcript file. ``TranscriptError`` when it is not ``fmt`` at all."""
    name = (fmt or "").strip().lower().replace("_", "-")
    reader = READERS.get(name)
    if reader is None:
        raise TranscriptError(f"Unknown transcript format {fmt!r}; use one of: {', '.join(FORMATS)}.")
    return reader(decode(data))
