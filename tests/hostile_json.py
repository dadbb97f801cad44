"""Hostile JSON for the read-back property test (``tests/api/test_readback_property.py``).

Bodies are mostly valid with a hostile value in one or two places (so it gets past validation to
storage and every later read), sometimes entirely arbitrary. The hostile atoms are the values that
broke ctxweb before: lone UTF-16 surrogates, NUL, strings longer than a column, huge and negative
numbers, floats that aren't finite once parsed (``1e999``), ISO dates at the ends of the calendar or
with offsets no database holds, JSON nested hundreds of levels deep, and wrong types.

Values are Python objects with ``Raw`` fragments where Python's own encoder can't say what is meant
(deep nesting, ``NaN``, ``1e999``, a 5,000-digit integer). ``dumps`` writes the JSON text; a lone
surrogate goes out as its ``\\udXXX`` escape, which is what a JSON client sends.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

# ----------------------------------------------------------------------------- JSON text


class Raw:
    """A JSON fragment sent exactly as written."""

    __slots__ = ("label", "text")

    def __init__(self, text: str, label: str | None = None) -> None:
        self.text = text
        self.label = label

    def __repr__(self) -> str:
        return self.label or f"Raw({self.text!r})"


def _string(value: str, ascii_only: bool) -> str:
    if ascii_only:
        return json.dumps(value)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate can only travel as its escape
        return json.dumps(value)
    return json.dumps(value, ensure_ascii=False)


def dumps(value: Any, *, ascii_only: bool = True) -> str:
    """JSON text for ``value`` (``Raw`` fragments as written). Recursion follows the Python value,
    which is shallow: the deep parts are ``Raw`` text."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, str):
        return _string(value, ascii_only)
    if isinstance(value, dict):
        items = (f"{_string(str(k), ascii_only)}: {dumps(v, ascii_only=ascii_only)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(dumps(v, ascii_only=ascii_only) for v in value) + "]"
    return json.dumps(value)


def encode(value: Any, *, ascii_only: bool = True) -> bytes:
    """The request body: ``dumps`` as UTF-8 (a lone surrogate is escaped, so this always encodes)."""
    return dumps(value, ascii_only=ascii_only).encode("utf-8")


# ----------------------------------------------------------------------------- atoms

LONE_SURROGATES = ["\ud83d", "\udc00", "a\ud83db", "\udfff\ud800", "\ude00 emoji cut: \ud83d"]
NULS = ["\x00", "a\x00b", "\x00\x00\x00"]
ODD_TEXT = [
    "",
    " ",
    "\t\n\r",
    "\u2028\u2029",
    "\ufeffBOM",
    "\uffff\ufffe",
    "\U0001f600",
    "e\u0301\u0301\u0301",
    "\u202eevil",
    "zero\u200bwidth",
    "<script>alert(1)</script>",
    "{{ x }}{% if x %}",
    "%s %(x)s {0} {x}",
    "\\",
    "\"'",
    "null",
    "' OR 1=1 --",
    "\x1b[31mred",
    "\x7f\x01\x1f",
    "ℌ𝔢𝔩𝔩𝔬 𝕨𝕠𝕣𝕝𝕕",
]
LONG_TEXT = [  # at and past the lengths of the columns (100, 150, 200, 255) and very long
    "m" * 100,
    "m" * 101,
    "n" * 150,
    "n" * 151,
    "o" * 199,
    "b" * 200,
    "b" * 201,
    "c" * 255,
    "c" * 256,
    "é" * 120,
    "🎉" * 70,
    "line\n" * 400,
    "x" * 20_000,
]

INTS = [
    2**80,
    -(2**80),
    2**64,
    2**63,
    2**63 - 1,
    -(2**63),
    -(2**63) - 1,
    2**53 + 1,
    2**32,
    2**31,
    2**31 - 1,
    -(2**31) - 1,
    -1,
    0,
    1,
    1023,
]
FLOATS = [1e308, -1e308, 5e-324, -0.0, 0.5, 1.0, 1e16, 2.5e-7, 1024.5]
NON_NUMBERS = [
    Raw("1e999"),
    Raw("-1e999"),
    Raw("NaN"),
    Raw("Infinity"),
    Raw("-Infinity"),
    Raw("-0"),
    Raw("1" + "0" * 400, "int_400_digits"),
    Raw("9" * 5000, "int_5000_digits"),
    Raw("1E400"),
    Raw("0.1e-400"),
]

EDGE_DATES = [  # Python reads them; their UTC moment or their offset is beyond what a database holds
    "0001-01-01T00:00:00+14:00",
    "0001-01-01T00:00:00+00:01",
    "0001-01-02T00:00:00+23:59",
    "9999-12-31T23:59:59-01:00",
    "9999-12-31T23:59:59-00:01",
    "2025-06-01T10:00:00+16:00",
    "2025-06-01T10:00:00+23:59",
    "2025-06-01T10:00:00-23:59",
    "2025-06-01T10:00:00+15:59",
    "2025-06-01T10:00:00-15:59",
    "2025-06-01T10:00:00+14:01",
    "2025-06-01T10:00:00+05:30:30.5",  # an offset with a fraction of a second
    "2025-06-01T10:00:00-00:00:00.000001",
]
ODD_DATES = [
    "0001-01-01T00:00:00Z",
    "0001-01-01",
    "9999-12-31T23:59:59.999999Z",
    "9999-12-31",
    "2025-06-01T10:00:00-12:00",
    "2025-06-01T10:00:00+05:45",
    "2025-06-01T10:00:00+00:00:01",
    "2025-06-01T10:00:00+05:30:30.5",
    "2025-06-01T10:00:00+0530",
    "2025-06-01T10:00:00",
    "2025-06-01 10:00:00+00:00",
    "2025-06-01T10:00:00.123456789Z",
    "20250601T100000Z",
    "2025-W23-1T10:00",
    "2024-02-29T12:00:00Z",
    "2025-02-29T12:00:00Z",
    "2025-06-01T24:00:00Z",
    "2025-13-01T00:00:00Z",
    "0000-01-01T00:00:00Z",
    "10000-01-01T00:00:00Z",
    "1970-01-01T00:00:00Z",
    "2038-01-19T03:14:08Z",
    "",
    "now",
]


PLAIN_SHORT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=4)


@st.composite
def iso_dates(draw: Any) -> str:
    """An ISO 8601 date-time near the ends of the calendar, with any offset Python reads (±23:59)."""
    year = draw(st.sampled_from([1, 2, 1970, 2000, 2025, 9998, 9999]))
    month, day = draw(st.sampled_from([(1, 1), (1, 2), (6, 15), (12, 30), (12, 31)]))
    hour, minute = draw(st.sampled_from([(0, 0), (0, 30), (12, 0), (23, 59)]))
    stamp = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:00"
    kind = draw(st.sampled_from(["z", "naive", "offset", "offset"]))
    if kind == "z":
        return stamp + "Z"
    if kind == "naive":
        return stamp
    sign = draw(st.sampled_from("+-"))
    oh = draw(st.integers(0, 23))
    om = draw(st.sampled_from([0, 1, 30, 45, 59]))
    return f"{stamp}{sign}{oh:02d}:{om:02d}"


def _deep(depth: int, kind: str) -> Raw:
    if kind == "list":
        text = "[" * depth + "1" + "]" * depth
    elif kind == "dict":
        text = '{"a": ' * depth + '"x"' + "}" * depth
    else:  # an object of lists of objects: what a tool's input looks like, only deeper
        half = depth // 2
        text = '{"k": [' * half + '"x"' + "]}" * half
    return Raw(text, f"deep_{kind}({depth})")


DEPTHS = [63, 64, 65, 100, 200, 400, 800, 990, 1100, 3000]
WRONG_TYPES = [None, True, False, [], {}, [None], {"": None}, 0, "", "x", [1, "a"], {"type": "text"}]

# Each example picks one theme (shared by every draw in it), so one common failure (a lone
# surrogate breaks nearly everything) doesn't hide the rarer ones: a "date" example holds odd
# dates and nothing else hostile. "all" mixes everything.
THEMES = ["surrogate", "nul", "long", "odd", "number", "date", "date", "deep", "type", "all", "all"]
THEME = st.shared(st.sampled_from(THEMES), key="hostile-theme")


def themed(other: st.SearchStrategy, **by_theme: st.SearchStrategy) -> st.SearchStrategy:
    """The strategy for this example's theme; ``other`` for the themes not named."""
    return THEME.flatmap(lambda theme: by_theme.get(theme, other))


SURROGATE_STR = st.tuples(PLAIN_SHORT, st.sampled_from(LONE_SURROGATES), PLAIN_SHORT).map("".join)
NUL_STR = st.tuples(PLAIN_SHORT, st.sampled_from(NULS), PLAIN_SHORT).map("".join)
# Exactly at or one past a column's size (what validation lets through, and what a value built from
# it, say a name plus " (continued)", no longer fits), then merely long.
LONG_STR = st.sampled_from(
    [
        "c" * 256,
        "b" * 200,
        "b" * 201,
        "m" * 101,
        "m" * 100,
        "c" * 255,
        "x" * 20_000,
        *(t for t in LONG_TEXT if len(t) not in (100, 101, 200, 201, 255, 256, 20_000)),
    ]
)
ODD_STR = st.sampled_from(ODD_TEXT)
ALL_DATES = st.one_of(st.sampled_from(EDGE_DATES), st.sampled_from(ODD_DATES), iso_dates())
ALL_NUMBERS = st.one_of(
    st.sampled_from(INTS),
    st.sampled_from(FLOATS),
    st.sampled_from(NON_NUMBERS),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
)
ALL_DEEP = st.builds(_deep, st.sampled_from(DEPTHS), st.sampled_from(["list", "dict", "mixed"]))
ALL_DEEP_OBJECTS = st.builds(_deep, st.sampled_from(DEPTHS), st.sampled_from(["dict", "mixed"]))
ALL_STR = st.one_of(SURROGATE_STR, NUL_STR, LONG_STR, ODD_STR, ALL_DATES)

HOSTILE_STR = themed(ODD_STR, surrogate=SURROGATE_STR, nul=NUL_STR, long=LONG_STR, date=ALL_DATES, all=ALL_STR)
HOSTILE_NUMBER = themed(st.sampled_from([0, 1, 1024, 8192]), number=ALL_NUMBERS, all=ALL_NUMBERS)
DATES = themed(
    st.sampled_from(["2025-06-01T10:00:00Z", "2025-06-01T12:00:00+02:00", "2025-06-01T10:00:00"]),
    date=ALL_DATES,
    all=ALL_DATES,
)


@st.composite
def edge_dates(draw: Any) -> str:
    """A date-time Python reads whose offset (±16:00 to ±23:59) or UTC moment (before year 1,
    after 9999) no database holds."""
    kind = draw(st.sampled_from(["offset", "start", "end"]))
    minute = draw(st.sampled_from([0, 1, 30, 59]))
    if kind == "offset":
        hour = draw(st.integers(16, 23))
        return f"2025-06-01T10:00:00{draw(st.sampled_from('+-'))}{hour:02d}:{minute:02d}"
    hour = draw(st.integers(0, 23))
    if kind == "start":
        return f"0001-01-01T{draw(st.integers(0, 12)):02d}:00:00+{hour:02d}:{max(minute, 1):02d}"
    return f"9999-12-31T{draw(st.integers(12, 23)):02d}:59:59-{hour:02d}:{max(minute, 1):02d}"


# What a created_at or timestamp field holds: in the date theme a date Python reads (so it gets
# past parsing) that a database may not hold.
CREATED_AT = themed(DATES, date=st.one_of(st.sampled_from(EDGE_DATES), edge_dates(), iso_dates()))
DEEP = themed(st.just([[1]]), deep=ALL_DEEP, all=ALL_DEEP)
DEEP_OBJECT = themed(st.just({"a": {"b": 1}}), deep=ALL_DEEP_OBJECTS, all=ALL_DEEP_OBJECTS)
WRONG = themed(HOSTILE_STR, type=st.sampled_from(WRONG_TYPES), all=st.sampled_from(WRONG_TYPES))
HOSTILE = themed(
    HOSTILE_STR,
    number=ALL_NUMBERS,
    deep=ALL_DEEP,
    type=st.sampled_from(WRONG_TYPES),
    all=st.one_of(ALL_STR, ALL_NUMBERS, ALL_DEEP, st.sampled_from(WRONG_TYPES)),
)


# How hostile an example is, shared by all its draws: most examples have a hostile spot or two (so
# it gets past validation to storage), some have hostile values nearly everywhere (recorded files
# aren't validated: the first value storage can't hold is the one that matters).
INTENSITY = st.shared(st.sampled_from([1, 1, 2, 4]), key="hostile-intensity")


@st.composite
def _pick(draw: Any, valid: st.SearchStrategy, hostile: st.SearchStrategy, pct: int) -> Any:
    # Shrinks towards the valid value: the smallest failing case keeps only the hostile parts that matter.
    if draw(st.integers(0, 99)) >= 100 - min(90, pct * draw(INTENSITY)):
        return draw(hostile)
    return draw(valid)


def sometimes(valid: st.SearchStrategy, hostile: st.SearchStrategy = HOSTILE, pct: int = 8) -> st.SearchStrategy:
    """``valid`` mostly, ``hostile`` in about ``pct`` percent of draws (times the example's intensity)."""
    return _pick(valid, hostile, pct)


PLAIN = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=24)


def text(pct: int = 6) -> st.SearchStrategy:
    """A string field: plain text, or a hostile string in about ``pct`` percent of draws."""
    return sometimes(PLAIN, HOSTILE_STR, pct)


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    PLAIN,
    HOSTILE,
)
KEYS = sometimes(st.text(max_size=8), HOSTILE_STR, 7)
JSON_ANY = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=12,
)
JSON_OBJECT = st.dictionaries(KEYS, JSON_ANY, max_size=4)


@st.composite
def with_extra(draw: Any, base: st.SearchStrategy) -> Any:
    """``base`` (a dict), sometimes with an extra key holding anything."""
    value = draw(base)
    if isinstance(value, dict) and draw(st.integers(0, 9)) == 9:
        value = {**value, draw(KEYS): draw(JSON_ANY)}
    return value


def _nodes(value: Any, path: tuple = ()) -> list[tuple]:
    """Every place in ``value`` (a drawn, shallow Python value) as a path of keys and indexes."""
    out = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            out.extend(_nodes(child, (*path, key)))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out.extend(_nodes(child, (*path, index)))
    return out


def _get(value: Any, path: tuple) -> Any:
    for step in path:
        value = value[step]
    return value


def _hostile_like(draw: Any, current: Any) -> Any:
    """Something hostile in place of ``current``, mostly of a kind that passes a type check (a
    copy: strategies hand out shared constants, and a later mutation may change it in place)."""
    return copy.deepcopy(_hostile_value(draw, current))


def _hostile_value(draw: Any, current: Any) -> Any:
    if draw(st.integers(0, 3)) == 0:
        return draw(HOSTILE)
    if isinstance(current, str):
        return draw(HOSTILE_STR)
    if isinstance(current, bool) or current is None:
        return draw(WRONG)
    if isinstance(current, int | float):
        return draw(HOSTILE_NUMBER)
    if isinstance(current, dict):
        return draw(st.one_of(DEEP_OBJECT, st.just({**current, draw(HOSTILE_STR): draw(JSON_ANY)})))
    if isinstance(current, list):
        return draw(st.one_of(DEEP, st.just([*current, draw(HOSTILE)])))
    return draw(HOSTILE)


# Keys whose values end up in a column of their own (or decide where the rest goes): where a value
# the database can't hold does the most harm.
STORED_KEYS = {
    "id",
    "tool_use_id",
    "tool_call_id",
    "name",
    "model",
    "client_id",
    "external_id",
    "created_at",
    "timestamp",
    "system",
    "system_prompt",
    "role",
    "project",
    "uuid",
    "sessionId",
    "agentId",
    "task_id",
    "context_window",
    "description",
    "instructions",
    "arguments",
}


def mutate(draw: Any, value: Any, *, most: int = 2) -> Any:
    """``value`` with up to ``most`` places replaced by something hostile (or a key renamed to a
    hostile string): a body valid but for one or two spots, so the spot gets past validation."""
    value = copy.deepcopy(value)  # a drawn value may share parts with a strategy's constants
    for _ in range(draw(st.integers(0, most))):
        nodes = _nodes(value)
        stored = [p for p in nodes if p and p[-1] in STORED_KEYS]
        if stored and draw(st.integers(0, 9)) < 7:  # mostly a field that ends up in a column of its own
            nodes = stored
        path = nodes[draw(st.integers(0, len(nodes) - 1))]
        if not path:
            value = _hostile_like(draw, value)
            continue
        parent = _get(value, path[:-1])
        if isinstance(parent, dict) and draw(st.integers(0, 4)) == 0:
            parent[draw(HOSTILE_STR)] = parent.pop(path[-1])
        else:
            parent[path[-1]] = _hostile_like(draw, parent[path[-1]])
    return value


def mutated(base: st.SearchStrategy, *, most: int = 2) -> st.SearchStrategy:
    """``base`` with up to ``most`` hostile spots (``mutate``)."""
    return _mutated(base, most)


@st.composite
def _mutated(draw: Any, base: st.SearchStrategy, most: int) -> Any:
    return mutate(draw, draw(base), most=most)


# ----------------------------------------------------------------------------- messages

TOOL_IDS = ["toolu_1", "toolu_2", "call_1"]
TOOL_NAMES = ["Bash", "Read", "Edit", "mcp__srv__tool"]
tool_ids = sometimes(st.sampled_from(TOOL_IDS), HOSTILE_STR, 15)
tool_names = sometimes(st.sampled_from(TOOL_NAMES), HOSTILE_STR, 15)
tool_inputs = sometimes(JSON_OBJECT, st.one_of(DEEP_OBJECT, HOSTILE), 10)

text_block = with_extra(st.fixed_dictionaries({"type": st.just("text"), "text": text()}))
image_block = st.fixed_dictionaries(
    {
        "type": st.just("image"),
        "source": sometimes(
            st.fixed_dictionaries(
                {
                    "type": st.just("base64"),
                    "media_type": st.just("image/png"),
                    "data": sometimes(st.just("iVBORw0KGgo="), HOSTILE_STR),
                }
            ),
            st.one_of(DEEP_OBJECT, JSON_OBJECT),
        ),
    }
)
thinking_block = st.fixed_dictionaries({"type": st.just("thinking"), "thinking": text(), "signature": text()})
document_block = st.fixed_dictionaries(
    {
        "type": st.just("document"),
        "source": st.fixed_dictionaries({"type": st.just("text"), "media_type": st.just("text/plain"), "data": text()}),
    }
)

# Blocks ctxweb stores as they came and reads only as JSON: the provider's server tool blocks, Claude
# Code's tool_reference (ToolSearch's results), and any type not known yet ("text" and the other
# types ctxweb reads are left out: their fields are checked).
CHECKED_BLOCK_TYPES = ("text", "tool_use", "tool_result", "image", "thinking", "compaction")
READ_BLOCK_TYPES = (*CHECKED_BLOCK_TYPES, "document", "redacted_thinking")  # counted by what they hold
OTHER_BLOCK_TYPES = st.one_of(
    st.sampled_from(
        [
            "tool_reference",
            "server_tool_use",
            "web_search_tool_result",
            "search_result",
            "container_upload",
            "mcp_tool_result",
            "hologram_20270101",
        ]
    ),
    PLAIN.filter(lambda t: bool(t) and t not in READ_BLOCK_TYPES),
)
PLAIN_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(-1e15, 1e15), PLAIN),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(PLAIN, inner, max_size=3),
    max_leaves=8,
)


plain_text_block = st.builds(lambda t: {"type": "text", "text": t}, PLAIN)


def other_block(
    values: st.SearchStrategy = PLAIN_JSON, texts: st.SearchStrategy = plain_text_block
) -> st.SearchStrategy:
    """A block of a type ctxweb does not read, with any fields (``values``), nested content too."""
    return st.builds(
        lambda kind, fields, nested: {**fields, **nested, "type": kind},
        OTHER_BLOCK_TYPES,
        st.dictionaries(PLAIN.filter(lambda k: k != "type"), values, max_size=3),
        st.one_of(st.just({}), st.builds(lambda inner: {"content": inner}, st.lists(texts, max_size=2))),
    )


tool_reference_block = st.builds(lambda name: {"type": "tool_reference", "tool_name": name}, PLAIN)


_other_blocks = st.lists(other_block(), min_size=1, max_size=3)


@st.composite
def block_conversations(draw: Any) -> list[dict[str, Any]]:
    """A prompt, a reply with such blocks around a tool call, its result holding ``tool_reference``
    and other blocks, and a user message with such blocks."""
    result = draw(st.lists(st.one_of(tool_reference_block, other_block(), plain_text_block), max_size=4))
    return [
        {"role": "user", "content": draw(PLAIN)},
        {
            "role": "assistant",
            "content": [
                *draw(_other_blocks),
                {"type": "tool_use", "id": "toolu_s1", "name": "ToolSearch", "input": {"query": "select:Read"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_s1", "content": result}]},
        {"role": "user", "content": [*draw(_other_blocks), {"type": "text", "text": "go on"}]},
    ]


def without_nul(value: Any) -> Any:
    """``value`` as ctxweb stores it: each NUL (keys too) is U+FFFD (docs/INGEST.md)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_nul(v) for v in value]
    return value


def unread_blocks(content: Any) -> list[dict[str, Any]]:
    """The blocks of ``content`` ctxweb does not read, a tool result's included."""
    out = []
    for block in content if isinstance(content, list) else []:
        if block["type"] == "tool_result" and isinstance(block["content"], list):
            out += [b for b in block["content"] if b["type"] not in READ_BLOCK_TYPES]
        elif block["type"] not in READ_BLOCK_TYPES:
            out.append(block)
    return out


def tool_use_block(tool_id: Any) -> st.SearchStrategy:
    return with_extra(
        st.fixed_dictionaries(
            {"type": st.just("tool_use"), "id": st.just(tool_id), "name": tool_names, "input": tool_inputs}
        )
    )


def tool_result_block(tool_id: Any) -> st.SearchStrategy:
    return with_extra(
        st.fixed_dictionaries(
            {
                "type": st.just("tool_result"),
                "tool_use_id": st.just(tool_id),
                "content": sometimes(
                    st.one_of(
                        text(),
                        st.lists(text_block, max_size=2),
                        st.lists(
                            st.one_of(text_block, tool_reference_block, other_block(JSON_ANY, text_block)), max_size=3
                        ),
                    ),
                    HOSTILE,
                    5,
                ),
            },
            optional={"is_error": sometimes(st.booleans())},
        )
    )


contents = sometimes(
    st.one_of(
        text(),
        st.lists(
            st.one_of(text_block, image_block, thinking_block, document_block, other_block(JSON_ANY, text_block)),
            max_size=3,
        ),
    )
)


def _message_fields() -> dict[str, st.SearchStrategy]:
    return {
        "client_id": sometimes(st.uuids().map(str), HOSTILE_STR, 12),
        "created_at": CREATED_AT,
        "metadata": sometimes(JSON_OBJECT, st.one_of(DEEP_OBJECT, HOSTILE), 12),
    }


def message(role: Any = None, content: st.SearchStrategy | None = None) -> st.SearchStrategy:
    roles = st.just(role) if role else sometimes(st.sampled_from(["user", "assistant", "system"]), HOSTILE, 4)
    return with_extra(
        st.fixed_dictionaries(
            {"role": roles, "content": contents if content is None else content}, optional=_message_fields()
        )
    )


@st.composite
def tool_turn(draw: Any) -> list[dict[str, Any]]:
    """An assistant's tool call and its result, Anthropic style or OpenAI style, sharing one id."""
    tool_id = draw(tool_ids)
    if draw(st.booleans()):
        prefix = draw(st.lists(st.one_of(text_block, thinking_block), max_size=1))
        call = draw(message("assistant", st.just([*prefix, draw(tool_use_block(tool_id))])))
        role = draw(st.sampled_from(["user", "tool"]))
        answer = draw(message(role, st.lists(tool_result_block(tool_id), min_size=1)))
        return [call, answer]
    arguments = draw(sometimes(JSON_OBJECT.map(lambda v: dumps(v)), HOSTILE_STR, 15))
    call = draw(message("assistant", text()))
    call["tool_calls"] = [
        draw(
            with_extra(
                st.fixed_dictionaries(
                    {
                        "id": st.just(tool_id),
                        "type": st.just("function"),
                        "function": st.fixed_dictionaries({"name": tool_names, "arguments": st.just(arguments)}),
                    }
                )
            )
        )
    ]
    answer = draw(message("tool", text()))
    answer["tool_call_id"] = tool_id
    return [call, answer]


@st.composite
def message_batches(draw: Any) -> Any:
    """A body for ``POST …/messages/``: one message, a list of them, or any JSON at all."""
    shape = draw(st.sampled_from(["one", "list", "turns", "turns", "wrapped", "any"]))
    if shape == "any":
        return draw(st.one_of(JSON_ANY, HOSTILE, st.lists(JSON_OBJECT, max_size=3)))
    if shape == "one":
        value = draw(message())
    elif shape == "list":
        value = draw(st.lists(message(), min_size=1, max_size=4))
    elif shape == "turns":
        turns = draw(st.lists(st.one_of(message().map(lambda m: [m]), tool_turn()), min_size=1, max_size=3))
        value = [m for turn in turns for m in turn]
    else:
        value = {"messages": draw(st.lists(message(), min_size=1, max_size=3))}
    messages = value["messages"] if isinstance(value, dict) and "messages" in value else value
    messages = messages if isinstance(messages, list) else [messages]
    if draw(THEME) == "date":  # the theme's atom where it matters: one message's created_at
        messages[draw(st.integers(0, len(messages) - 1))]["created_at"] = draw(CREATED_AT)
    return mutate(draw, value)


# ----------------------------------------------------------------------------- sessions

tool_schemas = with_extra(
    st.fixed_dictionaries(
        {
            "name": tool_names,
            "description": text(),
            "input_schema": sometimes(
                st.just({"type": "object", "properties": {"path": {"type": "string"}}}),
                st.one_of(DEEP_OBJECT, JSON_OBJECT, HOSTILE),
                20,
            ),
        }
    )
)
TOOLS = sometimes(st.lists(tool_schemas, max_size=3), st.one_of(HOSTILE, JSON_ANY, st.lists(HOSTILE, max_size=2)), 10)
MODELS = sometimes(st.sampled_from(["claude-sonnet-4-5", "gpt-4o", "unknown-model-x"]), HOSTILE_STR, 15)
FILE_MODELS = sometimes(st.sampled_from(["claude-sonnet-4-5", "gpt-4o"]), HOSTILE_STR, 40)  # a file's: unchecked
CONTEXT_WINDOWS = sometimes(st.sampled_from([None, 1024, 8192, 200_000, 100_000_000]), HOSTILE_NUMBER, 12)
BOOL_OR_NULL = sometimes(st.sampled_from([None, True, False]), HOSTILE, 5)


def session_fields() -> dict[str, st.SearchStrategy]:
    return {
        "name": text(25),
        "model": MODELS,
        "system_prompt": text(15),
        "tools": TOOLS,
        "external_id": text(25),
        "context_window": CONTEXT_WINDOWS,
        "auto_compact": BOOL_OR_NULL,
    }


def session_bodies(project_ref: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        mutated(with_extra(st.fixed_dictionaries({"project": project_ref}, optional=session_fields()))),
        JSON_ANY,
    )


def patch_bodies() -> st.SearchStrategy:
    fields = {
        **session_fields(),
        "status": sometimes(st.sampled_from(["active", "handed_off", "archived"]), HOSTILE, 10),
    }
    fields.pop("external_id")
    return st.one_of(mutated(with_extra(st.fixed_dictionaries({}, optional=fields))), JSON_ANY)


# ----------------------------------------------------------------------------- transcripts


@st.composite
def claude_code_lines(draw: Any, session: str) -> list[str]:
    """A Claude Code transcript: prompts, responses split over lines, tool results, system and summary
    lines, sub-agent lines, and now and then a line that is no event at all."""
    out: list[str] = []
    last: str | None = None
    ascii_only = draw(st.booleans())
    for n in range(draw(st.integers(1, 7))):
        uuid = draw(sometimes(st.just(f"{session}-u{n}"), HOSTILE_STR, 3))
        kind = draw(st.sampled_from(["prompt", "prompt", "response", "tool", "system", "summary", "garbage", "any"]))
        event: dict[str, Any] = {
            "type": "user",
            "uuid": uuid,
            "parentUuid": draw(sometimes(st.just(last), HOSTILE, 3)),
            "sessionId": draw(sometimes(st.just(session), HOSTILE_STR, 3)),
            "isSidechain": draw(sometimes(st.just(n % 3 == 2 and draw(st.booleans())), HOSTILE, 3)),
            "timestamp": draw(sometimes(st.just(f"2025-06-01T10:00:{n:02d}Z"), CREATED_AT, 50)),
        }
        if event["isSidechain"] is True and draw(st.booleans()):
            event["agentId"] = draw(text(10))
        tool_id = draw(tool_ids)
        if kind == "prompt":
            event["message"] = {"role": "user", "content": draw(contents)}
            if draw(st.integers(0, 3)) == 0:  # Claude Code's own summary, after a compact boundary or not
                event["isCompactSummary"] = draw(sometimes(st.just(True), HOSTILE, 4))
        elif kind == "response":
            event["type"] = "assistant"
            event["requestId"] = draw(text(3))
            event["message"] = draw(
                with_extra(
                    st.fixed_dictionaries(
                        {
                            "id": sometimes(st.just(f"msg_{n // 2}"), HOSTILE_STR, 4),
                            "role": st.just("assistant"),
                            "model": MODELS,
                            "content": sometimes(
                                st.lists(st.one_of(text_block, thinking_block, tool_use_block(tool_id)), max_size=2)
                            ),
                            "stop_reason": sometimes(st.sampled_from([None, "end_turn", "tool_use"])),
                            "usage": sometimes(
                                st.fixed_dictionaries(
                                    {"input_tokens": st.integers(0, 10**6), "output_tokens": st.integers(0, 10**4)}
                                ),
                                st.one_of(HOSTILE, st.fixed_dictionaries({"input_tokens": HOSTILE_NUMBER})),
                            ),
                        }
                    )
                )
            )
        elif kind == "tool":
            event["message"] = {"role": "user", "content": [draw(tool_result_block(tool_id))]}
            event["toolUseResult"] = draw(sometimes(JSON_OBJECT, st.one_of(DEEP, HOSTILE), 10))
        elif kind == "system":
            event.update(type="system", content=draw(text(10)), level="info")
            if draw(st.booleans()):
                event.update(subtype="compact_boundary", logicalParentUuid=draw(sometimes(st.just(last))))
        elif kind == "summary":
            event = {"type": "summary", "summary": draw(text(15)), "leafUuid": draw(sometimes(st.just(last)))}
        elif kind == "garbage":
            out.append(draw(st.sampled_from(["{", "[]", "null", '"text"', "{}", "\x00", "  "])))
            continue
        else:
            out.append(dumps(draw(st.one_of(JSON_ANY, DEEP, JSON_OBJECT)), ascii_only=ascii_only))
            continue
        last = uuid if isinstance(uuid, str) else last
        if "timestamp" in event and draw(THEME) == "date" and draw(st.booleans()):
            event["timestamp"] = draw(CREATED_AT)
        if draw(st.integers(0, 3)) == 0:
            event = mutate(draw, event, most=1)
        out.append(dumps(event, ascii_only=ascii_only))
    return [line.replace("\n", " ") + "\n" for line in out]


@st.composite
def openai_files(draw: Any) -> Any:
    """An OpenAI-format transcript: a chat list, a request, tau-bench episodes or a SWE-agent trajectory."""
    chat = draw(st.lists(st.one_of(message().map(lambda m: [m]), tool_turn()), min_size=1, max_size=3))
    chat = [m for turn in chat for m in turn]
    if draw(st.booleans()):
        chat.insert(0, {"role": draw(st.sampled_from(["system", "developer"])), "content": draw(text(12))})
    shape = draw(st.sampled_from(["list", "request", "request", "tau", "swe"]))
    if shape == "list":
        return chat
    if shape == "request":
        openai_tools = st.lists(
            st.fixed_dictionaries(
                {
                    "type": st.just("function"),
                    "function": st.fixed_dictionaries(
                        {"name": tool_names, "description": text(), "parameters": sometimes(JSON_OBJECT, DEEP_OBJECT)}
                    ),
                }
            ),
            max_size=2,
        )
        return draw(
            with_extra(
                st.fixed_dictionaries(
                    {"messages": st.just(chat)}, optional={"model": FILE_MODELS, "tools": sometimes(openai_tools)}
                )
            )
        )
    if shape == "tau":
        episode = st.fixed_dictionaries(
            {"traj": st.just(chat)},
            optional={
                "task_id": sometimes(st.integers(0, 9)),
                "trial": sometimes(st.integers(0, 3)),
                "reward": JSON_ANY,
            },
        )
        return draw(st.lists(episode, min_size=1, max_size=2))
    config = st.fixed_dictionaries(
        {
            "agent": st.fixed_dictionaries({"name": text(10), "model": st.fixed_dictionaries({"name": MODELS})}),
            "problem_statement": st.fixed_dictionaries({"id": text(10)}),
        }
    )
    return {
        "history": chat,
        "replay_config": draw(sometimes(st.one_of(config, config.map(dumps)), HOSTILE)),  # older versions: JSON text
        "info": draw(sometimes(st.fixed_dictionaries({"exit_status": text(10)}), HOSTILE)),
    }


SYSTEMS = sometimes(
    st.one_of(text(12), st.lists(text_block, max_size=2)), st.one_of(HOSTILE, st.lists(JSON_LEAVES, max_size=3)), 25
)


@st.composite
def anthropic_requests(draw: Any) -> dict[str, Any]:
    """An Anthropic Messages request (what ``count_tokens`` takes and an anthropic import reads)."""
    chat = draw(st.lists(st.one_of(message().map(lambda m: [m]), tool_turn()), min_size=1, max_size=3))
    body: dict[str, Any] = {"model": draw(FILE_MODELS), "messages": [m for turn in chat for m in turn]}
    if draw(st.booleans()):
        body["system"] = draw(SYSTEMS)
    if draw(st.booleans()):
        body["tools"] = draw(TOOLS)
    return draw(with_extra(st.just(body)))


@st.composite
def import_files(draw: Any, fmt: str) -> bytes:
    """The bytes of an upload in format ``fmt``; now and then bytes that are no transcript."""
    choice = draw(st.integers(0, 19))
    if choice == 0:
        return draw(st.binary(min_size=1, max_size=64))
    if choice == 1:
        return draw(st.sampled_from([b"\xff\xfe{}", b"\xef\xbb\xbf[]", b"\xed\xa0\xbd", b"{", b" ", b"\x00"]))
    if choice == 2:
        return encode(draw(st.one_of(JSON_ANY, DEEP)))
    ascii_only = draw(st.booleans())
    if fmt == "claude-code":
        return "".join(draw(claude_code_lines(session=draw(st.sampled_from(["cc-1", "cc-2"]))))).encode()
    if fmt == "openai":
        value = draw(mutated(openai_files()))
    else:
        value = draw(mutated(st.one_of(anthropic_requests(), st.lists(anthropic_requests(), min_size=1, max_size=2))))
    first = value[0] if isinstance(value, list) and value else value
    if isinstance(first, dict) and draw(THEME) in ("surrogate", "nul", "long"):
        # The theme's atom where it matters: a field of the file that becomes a column of the session.
        first[draw(st.sampled_from(["model", "system"] if fmt == "anthropic" else ["model"]))] = draw(HOSTILE_STR)
    if isinstance(value, list) and draw(st.booleans()):  # JSONL: one item per line
        return "\n".join(dumps(item, ascii_only=ascii_only) for item in value).encode()
    return encode(value, ascii_only=ascii_only)


def form_text(pct: int = 20) -> st.SearchStrategy:
    """A multipart form field: text without lone surrogates (a form can't carry them), NUL allowed."""
    hostile = themed(ODD_STR, nul=NUL_STR, long=LONG_STR, all=st.one_of(NUL_STR, LONG_STR, ODD_STR))
    return sometimes(st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=20), hostile, pct)
