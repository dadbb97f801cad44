"""What a JSON value must be before ctxweb stores it, and how recorded input is made so.

Storage and every later read (PostgreSQL's jsonb and text, psycopg's UTF-8 encoding, Python's own
recursion limit when a value is rendered or walked) hold only values that have:

- no lone UTF-16 surrogate (``"\\ud83d"``, say tool output cut inside an emoji): not UTF-8 at all;
- no U+0000: PostgreSQL refuses it in text and jsonb;
- no nesting deeper than ``MAX_DEPTH`` containers;
- no NaN or infinity (not JSON; jsonb refuses them);
- no float of 2**53 or more, which jsonb would turn into another number (``loads`` makes them integers).

Input a person or program sends through the API is *checked* (``problem``) and refused with a
clear error. Recorded transcripts, which nobody can fix, are *cleaned* (``clean``): a lone surrogate
or a NUL becomes U+FFFD and a part nested too deeply becomes the JSON text of that part, each counted.
Walks are iterative, so a deep value can't exhaust the stack while it is being looked at.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any

MAX_DEPTH = 64
REPLACEMENT = "\ufffd"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return bool(_SURROGATE.search(text))
    return False


def problem(value: Any, *, max_depth: int = MAX_DEPTH, where: str = "") -> tuple[str, str] | None:
    """``(code, detail)`` for the first thing in ``value`` that can't be stored, else None.
    NUL is not a problem here: callers decide whether to refuse or replace it."""
    stack: list[tuple[Any, int, str]] = [(value, 0, where)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            if has_lone_surrogate(item):
                return "invalid_unicode", f"{path or 'the value'} holds a lone UTF-16 surrogate (not valid Unicode)"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "invalid_number", f"{path or 'the value'} is not a finite number"
        elif isinstance(item, dict | list):
            if depth >= max_depth:
                return "too_deep", f"{path or 'the value'} is nested more than {max_depth} levels deep"
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                if isinstance(key, str) and has_lone_surrogate(key):
                    return "invalid_unicode", f"a key in {path or 'the value'} holds a lone UTF-16 surrogate"
                stack.append((child, depth + 1, _child_path(path, key)))
    return None


def _child_path(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


def clean_text(text: str, cleaned: Counter[str] | None = None) -> str:
    """``text`` with each lone surrogate and NUL replaced by U+FFFD (counted as ``unicode``)."""
    if not _needs_cleaning(text):
        return text
    fixed, n = _UNSTORABLE.subn(REPLACEMENT, text)
    if cleaned is not None and n:
        cleaned["unicode"] += n
    return fixed


def clean(value: Any, cleaned: Counter[str] | None = None, *, max_depth: int = MAX_DEPTH) -> Any:
    """A storable copy of a recorded value (the same object when nothing needed changing): strings
    cleaned as ``clean_text``, a container deeper than ``max_depth`` replaced by its JSON text
    (counted as ``too_deep``), a non-finite float by null (``number``)."""
    counter = cleaned if cleaned is not None else Counter()
    if problem(value, max_depth=max_depth) is None and not holds_nul(value):
        return value
    return _clean(value, counter, 0, max_depth)


def _clean(value: Any, counter: Counter[str], depth: int, max_depth: int) -> Any:
    # Recursion is bounded: below max_depth every container is turned into text.
    if isinstance(value, str):
        return clean_text(value, counter)
    if isinstance(value, float) and not math.isfinite(value):
        counter["number"] += 1
        return None
    if isinstance(value, dict | list):
        if depth >= max_depth:
            counter["too_deep"] += 1
            return clean_text(_json_text(value), counter)
        if isinstance(value, dict):
            return {clean_text(k, counter): _clean(v, counter, depth + 1, max_depth) for k, v in value.items()}
        return [_clean(v, counter, depth + 1, max_depth) for v in value]
    return value


def _json_text(value: Any) -> str:
    """The JSON text of a (possibly very deep) value, without recursing in Python."""
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (RecursionError, ValueError, TypeError):
        return "[a value nested too deeply to keep]"


def _needs_cleaning(text: str) -> bool:
    return "\x00" in text or has_lone_surrogate(text)


def holds_nul(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def loads(text: str | bytes, *, allow_nan: bool = False) -> Any:
    """``json.loads`` that turns a stack overflow on absurd nesting into the ``ValueError`` every
    other malformed input raises, and refuses NaN and infinities unless ``allow_nan`` (recorded
    files keep them until ``clean`` turns them into null)."""
    try:
        if allow_nan:
            return json.loads(text, parse_float=_number)
        return json.loads(text, parse_float=_number, parse_constant=_refuse_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def _number(text: str) -> float | int:
    """A JSON number with a fraction or exponent. PostgreSQL's jsonb keeps numbers as exact decimals,
    so a float of 2**53 or more would read back as the digits of its shortest form, a different
    number; every such float is a whole number, so it is kept as that integer (equal to it)."""
    value = float(text)
    if math.isfinite(value) and abs(value) >= 2**53:
        return int(value)
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")
