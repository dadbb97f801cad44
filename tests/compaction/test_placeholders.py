"""What a cleared text keeps under its placeholder: the file paths and error lines it mentioned, capped
(``compaction.reversible.cleared``, ``compaction.identifiers``)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.identifiers import ERROR_RE, PATH_RE, file_paths
from compaction.policy import DEFAULT_PRESERVE_PATTERNS, Policy
from compaction.reversible import (
    ERROR_LINE_CHARS,
    MARK,
    MAX_ERROR_LINES,
    MAX_PATH_CHARS,
    MAX_PATHS,
    MIN_ARGUMENT_TOKENS,
    apply_changes,
    cleared,
    compile_patterns,
    condense,
    plan_compact,
    result_text,
)
from compaction.tokens import OfflineTokenizer
from compaction.transcripts import read_transcript
from compaction.types import Msg
from tests.hypothesis_budget import ENGINE

TOK = OfflineTokenizer()
PATTERNS = compile_patterns(DEFAULT_PRESERVE_PATTERNS)
PATHS_PREFIX = "paths: "
MORE = re.compile(r" \(\+([\d,]+) more\)$")


def msg(seq: int, role: str, content: str | list[dict[str, Any]]) -> Msg:
    return Msg(seq, role, content, TOK.count_message(role, content))


def call(tid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


def result(tid: str, content: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": content}


def tail(first_seq: int) -> list[Msg]:
    """Two more user turns, so that everything before ``first_seq`` is old under keep_recent_turns=2."""
    return [
        msg(first_seq, "user", "Now look at the README."),
        msg(first_seq + 1, "assistant", "Reading it."),
        msg(first_seq + 2, "user", "And summarise it for me."),
        msg(first_seq + 3, "assistant", "Done."),
    ]


def listed_paths(placeholder: str) -> tuple[list[str], int]:
    """The paths a placeholder lists and how many more it says there were."""
    line = next((x for x in placeholder.splitlines()[1:] if x.startswith(PATHS_PREFIX)), None)
    if line is None:
        return [], 0
    body = line[len(PATHS_PREFIX) :]
    more = MORE.search(body)
    if more:
        body = body[: more.start()]
    return body.split(", "), int(more.group(1).replace(",", "")) if more else 0


def kept_lines(placeholder: str) -> list[str]:
    return [x for x in placeholder.splitlines()[1:] if not x.startswith(PATHS_PREFIX)]


def preserved(line: str) -> bool:
    return any(p.search(line) for p in PATTERNS)


# ----------------------------------------------------------------------------- identifiers


def test_paths_are_found_once_in_order_and_the_longer_spelling_wins():
    text = (
        "M  src/app/models.py\n"
        "Read /repo/lib/a.py, then lib/a.py again and ./dist/index.cjs\n"
        "see https://github.com/org/repo/blob/main/mix.exs and docs/guide.md:12\n"
        "not paths: README.md, src/, v1.2, 3/4, a/b\n"
        "src/app/models.py changed"
    )
    assert file_paths(text) == [
        "src/app/models.py",
        "/repo/lib/a.py",
        "./dist/index.cjs",
        "https://github.com/org/repo/blob/main/mix.exs",
        "docs/guide.md",
    ]


def test_an_error_line_is_one_that_reports_a_failure():
    for line in ("ERROR: x", "test_a FAILED", "Traceback (most recent call last):", "panic: nil map", "Fatal: no"):
        assert ERROR_RE.search(line)
    assert not ERROR_RE.search("INFO all 12 tests passed in 0.3 s")


# ----------------------------------------------------------------------------- cleared(), property

segment = st.text("abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=12)
paths = st.builds(
    lambda lead, dirs, name, ext: lead + "/".join([*dirs, f"{name}.{ext}"]),
    st.sampled_from(["", "/", "./", "../", "https://example.org/"]),
    st.lists(segment, min_size=1, max_size=5),
    segment,
    st.sampled_from(["py", "ts", "ex", "md", "json", "tar.gz"]),
)
noise = st.sampled_from(["", "   ", "INFO step done", "collected 12 items", "    return value", "ok", "=" * 30])
error_text = st.sampled_from(
    [
        "ERROR could not connect",
        "test_login FAILED",
        "Traceback (most recent call last):",
        "RuntimeException: boom",
        "panic: runtime error",
        "CRITICAL disk full",
    ]
)
output_line = st.one_of(
    noise,
    paths.map(lambda p: f"  M {p}"),
    st.lists(paths, min_size=1, max_size=4).map(" ".join),
    st.builds(lambda e, n: f"{e} #{n}", error_text, st.integers(0, 30)),
    st.builds(lambda e, p: f"{e} in {p}", error_text, paths),
    st.builds(lambda e, n: f"{e} {'x' * n}", error_text, st.integers(150, 400)),
    st.builds(lambda n: f"Exception at step {n}", st.integers(0, 40)),
)
outputs = st.lists(output_line, min_size=1, max_size=150).map("\n".join)


@settings(ENGINE)
@given(outputs)
def test_property_a_placeholder_keeps_paths_and_error_lines_within_its_caps(text):
    tokens = TOK.count_text(text)
    placeholder = cleared("Bash output ", text, tokens, PATTERNS)
    head, *_ = placeholder.splitlines()
    assert head.startswith(f"{MARK} Bash output cleared ({tokens:,} tokens") and head.endswith("revert restores]")

    kept = kept_lines(placeholder)
    assert len(kept) == len(set(kept)), "each kept line appears once"
    # Every line a preserve pattern protects, verbatim.
    for line in text.splitlines():
        if line.strip() and preserved(line):
            assert line in kept
    # The other error lines: the first MAX_ERROR_LINES distinct ones, each cut to ERROR_LINE_CHARS.
    others = [x.strip() for x in text.splitlines() if ERROR_RE.search(x) and not preserved(x)]
    cut = [s if len(s) <= ERROR_LINE_CHARS else s[: ERROR_LINE_CHARS - 1] + "…" for s in others]
    extra = [x for x in kept if not preserved(x)]
    assert extra == list(dict.fromkeys(cut))[:MAX_ERROR_LINES]
    assert all(len(x) <= ERROR_LINE_CHARS for x in extra)

    # Paths: those the kept lines don't already show, in order, up to the caps; the rest counted.
    wanted = [p for p in file_paths(text) if p not in "\n".join(kept)]
    shown, more = listed_paths(placeholder)
    assert len(shown) <= MAX_PATHS and len(", ".join(shown)) <= MAX_PATH_CHARS
    assert shown == wanted[: len(shown)] and more == len(wanted) - len(shown)
    fits = len(wanted) <= MAX_PATHS and sum(len(p) + 2 for p in wanted) <= MAX_PATH_CHARS
    if fits:
        assert shown == wanted
        for path in PATH_RE.findall(text):
            assert path in placeholder, f"{path!r} is missing"
    else:
        assert len(shown) == MAX_PATHS or sum(len(p) + 2 for p in wanted[: len(shown) + 1]) > MAX_PATH_CHARS


def test_a_long_listing_keeps_its_first_paths_and_says_how_many_more():
    listing = "\n".join(f"deps/package_{i:03d}/mix.exs" for i in range(400))
    placeholder = cleared("Glob output ", listing, TOK.count_text(listing), PATTERNS)
    shown, more = listed_paths(placeholder)
    assert shown == [f"deps/package_{i:03d}/mix.exs" for i in range(MAX_PATHS)]
    assert more == 400 - MAX_PATHS
    assert TOK.count_text(placeholder) < TOK.count_text(listing) / 5


def test_repeated_error_lines_are_kept_once():
    output = "\n".join(["FAILED tests/test_api.py::test_login - AssertionError"] * 50 + ["1 failed"])
    placeholder = cleared("Bash output ", output, TOK.count_text(output), PATTERNS)
    assert kept_lines(placeholder) == ["FAILED tests/test_api.py::test_login - AssertionError", "1 failed"]
    assert "paths:" not in placeholder, "the path is in a kept line already"


# ----------------------------------------------------------------------------- in a plan


def test_a_cleared_output_keeps_its_paths_and_error_lines():
    output = "\n".join(
        [
            *(f"[{i:04d}] building module {i} of the nightly bundle" for i in range(60)),
            "Compiling src/api/handlers.py and src/api/routes.py",
            "Traceback (most recent call last):",
            '  File "/srv/app/src/api/handlers.py", line 42, in login',
            "KeyError: 'user'",
        ]
    )
    messages = [
        msg(1, "user", "Build it."),
        msg(2, "assistant", [call("toolu_1", "Bash", command="make bundle")]),
        msg(3, "user", [result("toolu_1", output)]),
        *tail(4),
    ]
    (change,) = plan_compact(messages, Policy(protect_tool_tokens=0), context_window=200_000, tokenizer=TOK)
    text = change.content[0]["content"]
    assert text.startswith(MARK) and "[0003] building" not in text
    assert "Traceback (most recent call last):" in text.splitlines()
    shown, more = listed_paths(text)
    assert shown == ["src/api/routes.py", "/srv/app/src/api/handlers.py"] and more == 0


def test_an_output_of_paths_only_is_kept_when_its_placeholder_would_not_be_smaller():
    output = "\n".join(f"/home/dev/projects/service/src/module_{i}/handler.py" for i in range(6))
    assert TOK.count_text(output) >= 40
    messages = [
        msg(1, "user", "Find them."),
        msg(2, "assistant", [call("toolu_1", "Glob", pattern="**/handler.py")]),
        msg(3, "user", [result("toolu_1", output)]),
        *tail(4),
    ]
    assert cleared("Glob output ", output, TOK.count_text(output), PATTERNS).count("handler.py") == 6
    assert plan_compact(messages, Policy(protect_tool_tokens=0), context_window=200_000, tokenizer=TOK) == []


def test_a_long_argument_keeps_its_paths_and_a_short_edit_stays_whole():
    source = "\n".join(
        [
            "from app.config import load  # settings in config/settings.toml",
            *(f"def handler_{i}(request):\n    return respond(request, {i})" for i in range(40)),
            "    raise ValueError('bad request')",
        ]
    )
    small_edit = {"file_path": "app/views.py", "old_string": "return 1", "new_string": "raise NotFoundError()"}
    messages = [
        msg(1, "user", "Write the handlers and fix the view."),
        msg(
            2,
            "assistant",
            [
                call("toolu_w", "Write", file_path="app/handlers.py", content=source),
                call("toolu_e", "Edit", **small_edit),
            ],
        ),
        msg(3, "user", [result("toolu_w", "File written."), result("toolu_e", "Edited.")]),
        *tail(4),
    ]
    assert TOK.count_text(source) >= MIN_ARGUMENT_TOKENS > TOK.count_text(small_edit["new_string"])
    (change,) = plan_compact(messages, Policy(), context_window=200_000, tokenizer=TOK)
    write, edit = change.content
    content = write["input"]["content"]
    assert content.startswith(MARK) and "def handler_7" not in content
    assert listed_paths(content) == (["config/settings.toml"], 0)
    assert "    raise ValueError('bad request')" in content.splitlines()
    assert edit["input"] == small_edit


# ----------------------------------------------------------------------------- the shared transcripts


def texts(content: str | list[dict[str, Any]]) -> list[str]:
    """Each piece of text a strategy may rewrite: a message, a text block, a result, a string argument."""
    if isinstance(content, str):
        return [content]
    out = []
    for block in content:
        if block.get("type") == "text":
            out.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            out.append(result_text(block.get("content")))
        elif block.get("type") == "tool_use" and isinstance(block.get("input"), dict):
            out.extend(v for v in block["input"].values() if isinstance(v, str))
    return out


def placeholder_in(text: str) -> str | None:
    """The ``cleared`` placeholder a text is, or ends with (a command keeps its first line)."""
    for part in (text, text.partition("\n")[2]):
        if part.startswith(MARK) and " cleared (" in part.partition("\n")[0]:
            return part
    return None


def shared_sessions(folder: Path) -> list[tuple[str, list[Msg]]]:
    found = []
    files = [(p, "claude-code") for p in sorted((folder / "claude_code").glob("*.jsonl"))]
    files += [(p, "openai") for p in sorted((folder / "openai").glob("*")) if not p.name.startswith("LICENSE")]
    for path, fmt in files:
        for conversation in read_transcript(path.read_bytes(), fmt).conversations:
            if conversation.sidechain or not conversation.messages:
                continue
            messages = [
                msg(i, m["role"], m["content"]) for i, m in enumerate(conversation.messages, start=1) if m["content"]
            ]
            found.append((f"{path.name}:{conversation.key}", messages))
    return found


@pytest.mark.data
def test_compacting_the_shared_transcripts_keeps_their_paths_and_error_lines(shared_data):
    # Each session filled to 90 % of its window and compacted with the default policy, as
    # bench/compaction_strategies.py does: every cleared text keeps its error lines, its paths up to the cap and
    # is smaller than what it replaced; pooled, the sessions keep >= 90 % of their paths and >= 95 %
    # of their error lines.
    sessions = shared_sessions(shared_data)
    assert len(sessions) >= 30
    paths_total = paths_kept = errors_total = errors_kept = cleared_texts = 0
    for name, messages in sessions:
        window = math.ceil(sum(m.tokens for m in messages) / 0.9)
        changes = plan_compact(messages, Policy(), context_window=window, tokenizer=TOK)
        by_seq = {m.seq: m for m in messages}
        for change in changes:
            for old, new in zip(texts(by_seq[change.seq].content), texts(change.content), strict=True):
                if placeholder_in(new) is None:
                    continue
                cleared_texts += 1
                assert TOK.count_text(new) < TOK.count_text(old), f"{name} seq {change.seq} grew"
                for line in old.splitlines():
                    if preserved(line):
                        assert line in new.splitlines(), f"{name} seq {change.seq} lost {line!r}"
                _, more = listed_paths(new)
                missing = [p for p in file_paths(old) if p not in new]
                assert len(missing) <= more, f"{name} seq {change.seq} lost paths {missing[:3]}"
        after = "\n".join(t for m in apply_changes(messages, changes) for t in texts(m.content))
        before = [t for m in messages for t in texts(m.content)]
        session_paths = {p for t in before for p in PATH_RE.findall(t)}
        session_errors = {s for t in before for s in (x.strip() for x in t.splitlines()) if ERROR_RE.search(s)}
        paths_total += len(session_paths)
        paths_kept += sum(1 for p in session_paths if p in after)
        errors_total += len(session_errors)
        errors_kept += sum(1 for s in session_errors if s in after)
    assert cleared_texts > 300, "the transcripts hold plenty of old tool output to clear"
    assert paths_kept >= 0.90 * paths_total, f"{paths_kept} of {paths_total} paths kept"
    assert errors_kept >= 0.95 * errors_total, f"{errors_kept} of {errors_total} error lines kept"


@settings(ENGINE)
@given(outputs, st.integers(1, 10**6))
def test_property_a_placeholder_names_what_to_recall_its_message_by(text, seq):
    """``recall m<seq>`` in the head of a cleared output and in every elision of a condensed one: the
    id the MCP ``recall`` tool answers the original by (docs/SEARCH.md)."""
    head = cleared("Bash output ", text, TOK.count_text(text), PATTERNS, seq).splitlines()[0]
    assert head.endswith(f"; recall m{seq} or revert restores]")
    condensed = condense("\n".join(f"2026-01-01 12:00:{i % 60:02d} INFO step {i}" for i in range(400)), PATTERNS,
                         "log", seq)  # fmt: skip
    elisions = [line for line in (condensed or "").splitlines() if line.startswith(MARK)]
    assert elisions and all(line.endswith(f"recall m{seq} or revert restores them]") for line in elisions)
