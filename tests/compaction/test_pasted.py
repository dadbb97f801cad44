"""Output pasted into a user's text (``compaction.pasted``): what the reversible strategies may condense
(``pasted_output``), and that the words the person typed around it never change."""

from __future__ import annotations

import itertools
import re
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from compaction.pasted import pasted_spans, replace_spans
from compaction.policy import Policy
from compaction.reversible import MARK, Change, plan_compact
from compaction.tokens import OfflineTokenizer
from compaction.types import Msg
from tests.hypothesis_budget import ENGINE

TOK = OfflineTokenizer()
WINDOW = 200_000
TYPED = "The nightly import dies again, this is what the runner printed:"
ERROR = "ERROR importer.csv: failed to decode /srv/import/data/2024-05.csv (byte 0xef at 0)"


def log(n: int, *, error_at: int | None = None) -> str:
    lines = [
        f"2024-05-01 12:{i // 60 % 60:02d}:{i % 60:02d} INFO worker-{i % 4}: batch {i} of src/jobs/nightly.py done"
        for i in range(n)
    ]
    if error_at is not None:
        lines.insert(error_at, ERROR)
    return "\n".join(lines)


def parts(text: str) -> list[str]:
    return [text[s:e] for s, e in pasted_spans(text)]


def msg(seq: int, role: str, content: str | list[dict[str, Any]]) -> Msg:
    return Msg(seq, role, content, TOK.count_message(role, content))


def later_turns(first: int) -> list[Msg]:
    return [
        msg(first, "assistant", "Looking into it."),
        msg(first + 1, "user", "Also check the README."),
        msg(first + 2, "assistant", "Reading it."),
        msg(first + 3, "user", "And summarise it for me."),
        msg(first + 4, "assistant", "Done."),
    ]


def planned(messages: list[Msg]) -> dict[int, Change]:
    changes = plan_compact(messages, Policy(keep_recent_messages=0), context_window=WINDOW, tokenizer=TOK)
    return {c.seq: c for c in changes}


# ----------------------------------------------------------------------------- what counts as pasted


def test_a_labelled_output_is_the_lines_under_its_label_up_to_the_prose_after_it():
    body = log(50)
    text = f"{TYPED}\nBash output:\n{body}\n\nWhy does it stop there?"
    assert parts(text) == [body]


def test_prose_closing_a_labelled_output_stays_outside_it():
    body = log(50)
    assert parts(f"Bash output:\n{body}\nCan you fix the decoder please?") == [body]


def test_an_unlabelled_log_run_is_pasted_and_the_sentence_above_it_is_not():
    body = log(60, error_at=30)
    assert parts(f"{TYPED}\n{body}\nThanks.") == [body]


def test_a_short_run_of_log_like_lines_may_be_typed_and_stays():
    assert parts(f"{TYPED}\n{log(10)}") == []


def test_a_fence_under_a_label_or_holding_a_log_is_pasted_and_code_is_not():
    body = log(45)
    assert parts(f"Here it is.\nTest output:\n\n```\n{body}\n```\nThat is all.") == [body]
    assert parts(f"Here it is.\n~~~text\n{body}\n~~~") == [body]
    code = "\n".join(f"    total += row[{i}]  # column {i}" for i in range(80))
    assert parts(f"My loop:\n```python\n{code}\n```") == []


def test_a_traceback_is_pasted_up_to_its_exception_line():
    trace = "\n".join(
        ["Traceback (most recent call last):"]
        + [f'  File "/srv/app/mod_{i}.py", line {i}, in f{i}\n    f{i + 1}()' for i in range(6)]
    )
    text = f"It crashed like this:\n{trace}\nKeyError: 'user'\nAny idea?"
    assert parts(text) == [trace]


def test_a_harness_output_tags_body_is_pasted():
    text = "<bash-input>make test</bash-input><bash-stdout>collected 4 items\n4 passed</bash-stdout>"
    text += "<bash-stderr></bash-stderr>"
    assert parts(text) == ["collected 4 items\n4 passed"]


def test_prose_alone_has_nothing_pasted():
    prose = "\n".join(f"Please keep step {i} of the migration as it is, it matters." for i in range(80))
    assert parts(prose) == []


# ----------------------------------------------------------------------------- the strategy


def test_an_older_user_message_keeps_its_words_and_clears_the_output_pasted_into_it():
    body = log(2_000, error_at=1_000)
    text = f"{TYPED}\nBash output:\n{body}\n\nWhat should we do?"
    messages = [msg(1, "user", text), *later_turns(2)]
    assert messages[0].tokens > 40_000
    change = planned(messages)[1]
    assert change.strategy == "pasted_output"
    assert isinstance(change.content, str)
    assert change.content.startswith(f"{TYPED}\nBash output:\n{MARK} pasted output cleared (")
    assert change.content.endswith(f"{ERROR}\n\nWhat should we do?")
    assert "src/jobs/nightly.py" in change.content  # the paths it mentioned
    assert change.tokens_after < 300 < 40_000 < change.tokens_before


def test_pasted_output_in_a_text_block_is_cleared_and_other_blocks_stay():
    body = log(300)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    messages = [msg(1, "user", [{"type": "text", "text": f"{TYPED}\n{body}"}, image]), *later_turns(2)]
    change = planned(messages)[1]
    assert isinstance(change.content, list)
    assert change.content[0]["text"].startswith(f"{TYPED}\n{MARK} pasted output cleared (")
    assert change.content[1] == image


def test_the_newest_message_a_person_typed_keeps_what_they_pasted():
    text = f"{TYPED}\nBash output:\n{log(500)}"
    messages = [
        msg(1, "user", "Start."),
        msg(2, "assistant", "Started."),
        msg(3, "user", text),
        msg(4, "assistant", "On it."),
    ]
    assert planned(messages) == {}


def test_a_small_paste_costs_about_what_its_placeholder_would_and_stays():
    messages = [msg(1, "user", f"{TYPED}\nBash output:\n{log(12)}"), *later_turns(2)]
    assert planned(messages) == {}


def test_a_second_compaction_leaves_a_cleared_paste_alone():
    messages = [msg(1, "user", f"{TYPED}\nBash output:\n{log(800)}"), *later_turns(2)]
    first = planned(messages)[1]
    again = [msg(1, "user", first.content), *later_turns(2)]
    assert planned(again) == {}


# ----------------------------------------------------------------------------- properties

PROSE = st.lists(
    st.sampled_from(["please", "keep", "the", "parser", "fast", "and", "check", "why", "it", "stops"]),
    min_size=3,
    max_size=12,
).map(lambda words: " ".join(words).capitalize() + ".")
LOG_LINE = st.integers(0, 10_000).map(lambda i: f"2024-05-01 10:00:{i % 60:02d} INFO step {i}: wrote out/{i}.json")
ERROR_LINE = st.integers(0, 99).map(lambda i: f"ERROR step {i}: failed on src/mod_{i}.py")
OUTPUT = st.lists(st.one_of(LOG_LINE, LOG_LINE, ERROR_LINE), min_size=1, max_size=90).map("\n".join)
LONG_OUTPUT = st.lists(LOG_LINE, min_size=40, max_size=90).map("\n".join)
PASTED = st.one_of(
    OUTPUT,
    LONG_OUTPUT,
    LONG_OUTPUT.map(lambda out: f"Bash output:\n{out}"),
    OUTPUT.map(lambda out: f"Bash output:\n{out}"),
    OUTPUT.map(lambda out: f"```\n{out}\n```"),
    OUTPUT.map(lambda out: f"<bash-stdout>{out}</bash-stdout>"),
)


@st.composite
def user_texts(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A text a person wrote around output they pasted, and the lines they typed themselves."""
    typed: list[str] = []
    chunks: list[str] = []
    kinds = draw(st.lists(st.sampled_from(["typed", "pasted"]), min_size=1, max_size=6))
    for kind in [*kinds, "pasted"] if "pasted" not in kinds else kinds:
        if kind == "typed":
            line = draw(PROSE)
            typed.append(line)
            chunks.append(line)
        else:
            chunks.append(draw(PASTED))
    return "\n\n".join(chunks), typed


def outside(text: str, spans: list[tuple[int, int]]) -> list[str]:
    edges = [0, *(x for span in spans for x in span), len(text)]
    return [text[edges[i] : edges[i + 1]] for i in range(0, len(edges), 2)]


@ENGINE
@given(st.text(st.characters(blacklist_characters="\x00"), max_size=400) | user_texts().map(lambda made: made[0]))
def test_spans_are_ordered_apart_and_replacing_them_changes_nothing_else(text):
    spans = pasted_spans(text)
    assert all(0 <= s < e <= len(text) for s, e in spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
    new = replace_spans(text, spans, lambda part: "\x00")
    if not spans:
        assert new is None
        return
    assert new is not None and new.split("\x00") == outside(text, spans)


@ENGINE
@given(user_texts())
def test_condensing_a_user_text_keeps_every_line_typed_and_nothing_outside_the_pasted_parts_changes(made):
    text, typed = made
    change = planned([msg(1, "user", text), *later_turns(2)]).get(1)
    if change is None:
        return
    assert change.strategy == "pasted_output" and isinstance(change.content, str)
    assert all(line in change.content.splitlines() for line in typed)
    # The new text is the old one with each pasted part as it was or a placeholder: every character
    # outside them is where it was, so the original is the new text with the parts put back.
    spans = pasted_spans(text)
    pattern = "".join(
        re.escape(piece) + (f"(?:{re.escape(text[s:e])}|{re.escape(MARK)}.*?)" if i < len(spans) else "")
        for i, (piece, (s, e)) in enumerate(zip(outside(text, spans), [*spans, (0, 0)], strict=True))
    )
    assert re.fullmatch(pattern, change.content, re.DOTALL)


def test_a_label_followed_by_a_sentence_introduces_the_persons_own_words():
    text = "SIMULATION OUTPUT:\nThe agent produced an 8-file manifest including:\n" + log(50)
    assert parts(text) == [log(50)]
