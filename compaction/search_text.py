"""The words a search reads in a stored value (a message's content, a checkpoint): its JSON's strings,
without block types, tool-call ids and long payloads without a space (base64 images and documents),
at most ``MAX_CHARS``. The same rule as the database's ``ctx_search_text`` (migration 0039), so a
snippet shows the text a match was found in; and a match's marks, as HTML and as plain text."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

MAX_CHARS = 200_000
_LONG = 20_000
_STRUCTURE = frozenset(
    {"text", "tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document", "base64", "input_text",
     "output_text", "function_call", "function_call_output", "message", "reasoning", "ephemeral", "user", "assistant",
     "tool", "system"}
)  # fmt: skip
_ID = re.compile(r"\A(?:toolu|srvtoolu|call|msg|req|fc|rs)_[A-Za-z0-9]+\Z")
_SPACE = re.compile(r"\s")


def search_text(value: Any) -> str:
    return "\n".join(_strings(value))[:MAX_CHARS]


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, str):
        if (len(node) < _LONG or _SPACE.search(node)) and node not in _STRUCTURE and not _ID.match(node):
            yield node
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, dict):
        for item in node.values():
            yield from _strings(item)


def mark_terms(text: str, terms: list[str]) -> str:
    """``text`` as HTML: escaped, each of ``terms`` (any case) in ``<mark>``."""
    if not terms:
        return html.escape(text)
    pattern = re.compile("|".join(re.escape(t) for t in sorted(terms, key=len, reverse=True)), re.I)
    out, at = [], 0
    for match in pattern.finditer(text):
        out += [html.escape(text[at : match.start()]), "<mark>", html.escape(match.group(0)), "</mark>"]
        at = match.end()
    out.append(html.escape(text[at:]))
    return "".join(out)


def plain_snippet(snippet: str) -> str:
    """A hit's snippet (HTML) as plain text, the matches in «» (what an agent or a terminal reads)."""
    return html.unescape(snippet.replace("<mark>", "«").replace("</mark>", "»"))
