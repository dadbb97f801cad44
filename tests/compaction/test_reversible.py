"""Reversible compaction (``compaction.reversible``): what each strategy does, and what it never touches."""

from __future__ import annotations

import copy
import itertools
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.context import to_anthropic_messages
from compaction.policy import DEFAULT_PRESERVE_PATTERNS, Policy
from compaction.reversible import MARK, Change, apply_changes, plan_compact, result_text
from compaction.tokens import OfflineTokenizer
from compaction.types import Msg
from tests.hypothesis_budget import ENGINE

TOK = OfflineTokenizer()
WINDOW = 200_000
PATTERNS = [re.compile(p, re.IGNORECASE) for p in DEFAULT_PRESERVE_PATTERNS]


def msg(seq: int, role: str, content: str | list[dict[str, Any]]) -> Msg:
    return Msg(seq, role, content, TOK.count_message(role, content))


def call(tid: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


def result(tid: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": content, **extra}


def log_lines(n: int, prefix: str = "INFO step") -> list[str]:
    return [f"{prefix} {i}: processed batch {i * 7} of the nightly import in {i % 13} ms" for i in range(n)]


def plan(messages: list[Msg], window: int = WINDOW, **policy: Any) -> dict[int, Change]:
    # These short sessions test one rule each; the keep-recent-messages floor has its own tests.
    policy.setdefault("keep_recent_messages", 0)
    changes = plan_compact(messages, Policy(**policy), context_window=window, tokenizer=TOK)
    seqs = [c.seq for c in changes]
    assert seqs == sorted(set(seqs)), "one change per message, in seq order"
    return {c.seq: c for c in changes}


def tail(first_seq: int) -> list[Msg]:
    """Two more user turns, so that everything before ``first_seq`` is old under keep_recent_turns=2."""
    return [
        msg(first_seq, "user", "Now look at the README."),
        msg(first_seq + 1, "assistant", "Reading it."),
        msg(first_seq + 2, "user", "And summarise it for me."),
        msg(first_seq + 3, "assistant", "Done."),
    ]


def matching_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if any(p.search(line) for p in PATTERNS)]


# ----------------------------------------------------------------------------- tool_output


def test_old_tool_output_becomes_a_placeholder_naming_the_tool_and_its_size():
    output = "\n".join([*log_lines(150), "FAILED tests/test_api.py::test_login - AssertionError", *log_lines(50)])
    messages = [
        msg(1, "user", "Run the test suite."),
        msg(2, "assistant", [{"type": "text", "text": "Running."}, call("toolu_1", "Bash", command="pytest -q")]),
        msg(3, "user", [result("toolu_1", output)]),
        *tail(4),
    ]
    changes = plan(messages, protect_tool_tokens=0)

    assert set(changes) == {3}
    change = changes[3]
    assert change.strategy == "tool_output"
    (block,) = change.content
    assert block["type"] == "tool_result" and block["tool_use_id"] == "toolu_1"
    text = block["content"]
    output_tokens = TOK.count_text(output)
    assert text.startswith(MARK)
    assert "Bash" in text.splitlines()[0]
    assert f"{output_tokens:,} tokens" in text and "201 lines" in text
    assert "FAILED tests/test_api.py::test_login - AssertionError" in text.splitlines()
    assert "INFO step 3:" not in text
    assert change.tokens_before == messages[2].tokens
    assert change.tokens_after == TOK.count_message("user", change.content) < change.tokens_before
    assert change.saved == change.tokens_before - change.tokens_after > output_tokens - 60


def test_a_tool_result_given_as_blocks_is_cleared_and_keeps_its_flags():
    output = [{"type": "text", "text": "\n".join(log_lines(80))}, {"type": "text", "text": "critical: disk full"}]
    messages = [
        msg(1, "user", "Check the disk."),
        msg(2, "assistant", [call("toolu_9", "Bash", command="df -h")]),
        msg(3, "user", [result("toolu_9", output, is_error=True)]),
        *tail(4),
    ]
    block = plan(messages, protect_tool_tokens=0)[3].content[0]
    assert block["is_error"] is True and block["tool_use_id"] == "toolu_9"
    assert block["content"].startswith(MARK) and "critical: disk full" in block["content"].splitlines()


def test_long_arguments_of_an_old_call_are_cleared_but_identifiers_stay():
    source = "\n".join(f"def handler_{i}(request):\n    return respond(request, {i})" for i in range(60))
    script = "python - <<'EOF'\n" + "\n".join(f"print('row {i}', {i} * 3)" for i in range(80)) + "\nEOF"
    messages = [
        msg(1, "user", "Write the handlers, then run the script."),
        msg(
            2,
            "assistant",
            [
                call("toolu_w", "Write", file_path="app/handlers.py", content=source),
                call("toolu_b", "Bash", command=script, description="generate rows"),
            ],
        ),
        msg(3, "user", [result("toolu_w", "File written."), result("toolu_b", "ok")]),
        *tail(4),
    ]
    change = plan(messages)[2]

    assert change.strategy == "tool_output"
    write, bash = change.content
    assert (write["id"], write["name"], bash["id"], bash["name"]) == ("toolu_w", "Write", "toolu_b", "Bash")
    assert set(write["input"]) == {"file_path", "content"} and set(bash["input"]) == {"command", "description"}
    assert write["input"]["file_path"] == "app/handlers.py"
    assert write["input"]["content"].startswith(MARK)
    assert f"{TOK.count_text(source):,} tokens" in write["input"]["content"]
    command = bash["input"]["command"]
    assert command.splitlines()[0] == "python - <<'EOF'", "the first line of a command says what ran"
    assert command.splitlines()[1].startswith(MARK) and "print('row 7'" not in command
    assert bash["input"]["description"] == "generate rows"
    assert change.tokens_after < change.tokens_before


def test_small_outputs_are_not_worth_a_placeholder():
    messages = [
        msg(1, "user", "List the files."),
        msg(2, "assistant", [call("toolu_1", "Bash", command="ls")]),
        msg(3, "user", [result("toolu_1", "README.md\nsetup.py\nsrc")]),
        *tail(4),
    ]
    assert plan(messages, protect_tool_tokens=0) == {}


# ----------------------------------------------------------------------------- duplicate


def test_a_repeated_tool_output_becomes_a_reference_to_the_first_one():
    listing = "\n".join(f"src/module_{i}/component_{i}.py  {i * 113} bytes" for i in range(40))
    respaced = "  " + listing.replace("\n", " \n\n ").replace("  ", "   ") + "\n"
    messages = [
        msg(1, "user", "What is in src?"),
        msg(2, "assistant", [call("toolu_1", "Bash", command="ls -l src")]),
        msg(3, "user", [result("toolu_1", listing)]),
        msg(4, "assistant", [call("toolu_2", "Bash", command="ls -l src")]),
        msg(5, "user", [result("toolu_2", respaced)]),
        *tail(6),
    ]
    changes = plan(messages, protect_tool_tokens=0)

    assert changes[5].strategy == "duplicate"
    block = changes[5].content[0]
    assert block["tool_use_id"] == "toolu_2"
    assert block["content"].startswith(MARK) and "seq 3" in block["content"]


def test_a_repeated_text_becomes_a_reference_and_keeps_preserved_lines():
    explanation = (
        "The importer reads every CSV row, validates the header, maps the columns onto the model and "
        "writes the rows in batches of five hundred inside one transaction per batch.\n"
        "## Decision: keep the batch size at 500 because larger batches hit the lock timeout\n"
        "Rows that fail validation are collected and reported at the end with their line numbers."
    )
    messages = [
        msg(1, "user", "How does the importer work?"),
        msg(2, "assistant", explanation),
        msg(3, "user", "Say it again please."),
        msg(4, "assistant", [{"type": "text", "text": "\n  " + explanation.replace(". ", ".   ") + "  \n"}]),
        *tail(5),
    ]
    changes = plan(messages)

    assert set(changes) == {4}
    assert changes[4].strategy == "duplicate"
    text = changes[4].content[0]["text"]
    assert text.startswith(MARK) and "seq 2" in text
    assert "## Decision: keep the batch size at 500 because larger batches hit the lock timeout" in text.splitlines()


# ----------------------------------------------------------------------------- verbose


def test_a_long_log_keeps_its_head_tail_and_preserved_lines():
    lines = log_lines(200)
    lines[100] = "ERROR could not reach the database at db:5432"
    messages = [
        msg(1, "user", "Here is the log from last night."),
        msg(2, "assistant", "Here it is again, annotated:\n" + "\n".join(lines)),
        *tail(3),
    ]
    change = plan(messages)[2]

    assert change.strategy == "verbose"
    out = change.content.splitlines()
    original = ["Here it is again, annotated:", *lines]
    assert out[:12] == original[:12]
    assert out[-8:] == original[-8:]
    assert "ERROR could not reach the database at db:5432" in out
    markers = [line for line in out if line.startswith(MARK)]
    assert len(markers) == 2
    elided = sum(int(re.search(r"(\d+) lines of log output elided", m).group(1)) for m in markers)
    assert elided == len(original) - 12 - 8 - 1
    assert len(out) == 12 + 8 + 1 + 2


def test_a_long_diff_is_condensed_as_a_diff():
    diff = ["diff --git a/app/models.py b/app/models.py", "--- a/app/models.py", "+++ b/app/models.py"]
    for i in range(40):
        diff += [
            f"@@ -{i * 10},3 +{i * 10},4 @@",
            f"-    old_value_{i} = compute({i})",
            f"+    new_value_{i} = compute({i})",
        ]
    messages = [msg(1, "user", "Show me the change."), msg(2, "assistant", "\n".join(diff)), *tail(3)]
    change = plan(messages)[2]
    assert change.strategy == "verbose"
    assert change.content.startswith("diff --git a/app/models.py")
    assert "lines of diff output elided" in change.content


def test_short_lined_prose_is_never_condensed():
    prose = "\n\n".join(
        " ".join(f"Sentence {i} explains one more detail of the design in plain words." for i in range(j, j + 4))
        for j in range(0, 40, 4)
    )
    messages = [msg(1, "user", "Explain the design."), msg(2, "assistant", prose), *tail(3)]
    assert TOK.count_text(prose) >= 400
    assert plan(messages) == {}


PARAGRAPHS = "\n\n".join(
    " ".join(f"Sentence {i} explains one more detail of the design in plain words." for i in range(j, j + 20))
    for j in range(0, 80, 20)
)
CODE = "\n".join(
    f"def handler_{i}(request):\n    payload = load(request)\n    return respond(request, payload, {i})\n"
    for i in range(30)
)


@pytest.mark.parametrize("text", [PARAGRAPHS, CODE], ids=["prose-paragraphs", "code-listing"])
def test_prose_and_code_are_not_condensed_as_logs(text):
    messages = [msg(1, "user", "Explain the design."), msg(2, "assistant", text), *tail(3)]
    assert TOK.count_text(text) >= 400
    assert plan(messages) == {}


# ----------------------------------------------------------------------------- what is never touched


def _big_session(n_turns: int) -> list[Msg]:
    """``n_turns`` rounds of prompt → call → identical large output (duplicates and prunable output
    everywhere), ending with an assistant reply."""
    output = "\n".join(log_lines(120))
    messages: list[Msg] = []
    for turn in range(n_turns):
        base = len(messages) + 1
        messages += [
            msg(base, "user", f"Step {turn}: run the import again."),
            msg(base + 1, "assistant", [call(f"toolu_{turn}", "Bash", command=f"./import.sh --run {turn}")]),
            msg(base + 2, "user", [result(f"toolu_{turn}", output)]),
        ]
    messages.append(msg(len(messages) + 1, "assistant", "All runs finished."))
    return messages


@pytest.mark.parametrize("keep", [1, 2, 3])
def test_the_newest_user_turns_and_everything_after_them_are_untouched(keep):
    messages = _big_session(5)
    changes = plan(messages, keep_recent_turns=keep, protect_tool_tokens=0)
    user_positions = [i for i, m in enumerate(messages) if m.role == "user"]
    first_protected = messages[user_positions[-keep]].seq
    # Every older output is pruned (the first) or a duplicate (the rest); nothing from the cut-off on.
    assert set(changes) == {seq for seq in (3, 6, 9, 12, 15) if seq < first_protected}


def test_keep_recent_turns_zero_still_keeps_the_last_user_message_and_the_last_prompt():
    messages = _big_session(4)
    # The last user message is seq 12 (a tool result); the last prompt someone typed is seq 10.
    changes = plan(messages, keep_recent_turns=0, protect_tool_tokens=0)
    assert 12 not in changes and 10 not in changes
    assert {3, 6, 9} <= set(changes)


def test_the_last_prompt_a_person_typed_is_kept_even_far_back():
    pasted = "Please fix this:\n" + "\n".join(log_lines(150, prefix="trace frame"))
    messages = [
        msg(1, "user", pasted),
        msg(2, "assistant", [call("toolu_1", "Bash", command="make test")]),
        msg(3, "user", [result("toolu_1", "\n".join(log_lines(90)))]),
        msg(4, "assistant", [call("toolu_2", "Bash", command="make lint")]),
        msg(5, "user", [result("toolu_2", "\n".join(log_lines(90, prefix="lint")))]),
        msg(6, "assistant", [call("toolu_3", "Bash", command="make docs")]),
        msg(7, "user", [result("toolu_3", "docs built")]),
        msg(8, "assistant", "Working on it."),
    ]
    changes = plan(messages, keep_recent_turns=1, protect_tool_tokens=0)
    assert 1 not in changes
    assert {3, 5} <= set(changes)


def test_the_newest_tool_output_up_to_the_protected_tokens_is_untouched():
    newest, older = "\n".join(log_lines(60, "new")), "\n".join(log_lines(60, "old"))
    messages = [
        msg(1, "user", "Run both."),
        msg(2, "assistant", [call("toolu_1", "Bash", command="a")]),
        msg(3, "user", [result("toolu_1", older)]),
        msg(4, "assistant", [call("toolu_2", "Bash", command="b")]),
        msg(5, "user", [result("toolu_2", newest)]),
        msg(6, "assistant", "Both ran."),
        msg(7, "user", "Thanks."),
        msg(8, "assistant", "Anything else?"),
        msg(9, "user", "No."),
    ]
    newest_cost = TOK.count_message("user", [result("toolu_2", newest)]) - TOK.count_message("user", [])
    changes = plan(messages, keep_recent_turns=0, protect_tool_tokens=newest_cost)
    assert set(changes) == {3}
    # One token less and the newest output is no longer protected.
    assert set(plan(messages, keep_recent_turns=0, protect_tool_tokens=newest_cost - 1)) == {3, 5}


def test_the_protected_tool_tokens_are_capped_at_a_fifth_of_the_window():
    output = "\n".join(log_lines(60))
    messages = [
        msg(1, "user", "Run it."),
        msg(2, "assistant", [call("toolu_1", "Bash", command="a")]),
        msg(3, "user", [result("toolu_1", output)]),
        msg(4, "assistant", "Ran."),
        msg(5, "user", "Thanks."),
        msg(6, "assistant", "Anything else?"),
        msg(7, "user", "No."),
    ]
    cost = TOK.count_message("user", [result("toolu_1", output)]) - TOK.count_message("user", [])
    assert plan(messages, keep_recent_turns=0, protect_tool_tokens=10**6, window=cost * 5 + 5) == {}
    assert set(plan(messages, keep_recent_turns=0, protect_tool_tokens=10**6, window=cost * 5 - 10)) == {3}


def test_planning_is_deterministic_and_leaves_its_input_alone():
    messages = _big_session(4)
    before = copy.deepcopy(messages)
    first = plan_compact(messages, Policy(), context_window=2_000, tokenizer=TOK)
    second = plan_compact(copy.deepcopy(messages), Policy(), context_window=2_000, tokenizer=TOK)
    assert first and first == second
    assert messages == before


def test_a_second_compaction_leaves_the_first_ones_placeholders_alone():
    messages = _big_session(4)
    messages[1] = msg(2, "assistant", [call("toolu_0", "Write", file_path="a.py", content="\n".join(log_lines(50)))])
    changes = plan_compact(messages, Policy(), context_window=2_000, tokenizer=TOK)
    assert {c.strategy for c in changes} >= {"tool_output", "duplicate"}
    again = plan_compact(apply_changes(messages, changes), Policy(), context_window=2_000, tokenizer=TOK)
    assert again == []


def test_a_second_compaction_leaves_a_cleared_command_alone():
    script = "x\n" + "\n".join(f"line {i}" for i in range(1000)) + "\n" + "\n".join(f"error {i}" for i in range(40))
    messages = [
        msg(1, "user", "Run the script."),
        msg(2, "assistant", [call("toolu_1", "Bash", command=script)]),
        msg(3, "user", [result("toolu_1", "ok")]),
        msg(4, "user", "Next."),
        msg(5, "assistant", "Sure."),
        msg(6, "user", "Go on."),
        msg(7, "assistant", "Going."),
    ]
    policy = Policy(keep_recent_turns=1, protect_tool_tokens=0, keep_recent_messages=0)
    first = plan_compact(messages, policy, context_window=WINDOW, tokenizer=TOK)
    assert [c.seq for c in first] == [2]
    assert "1,040 lines)" in first[0].content[0]["input"]["command"]
    assert plan_compact(apply_changes(messages, first), policy, context_window=WINDOW, tokenizer=TOK) == []


# ----------------------------------------------------------------------------- properties

PRESERVED = [
    "ERROR: connection refused by upstream",
    "test_checkout FAILED (AssertionError: 3 != 4)",
    "## Decision: use Postgres for the queue",
    "ADR-17 accepted: one worker per tenant",
    "Critical: the token expired",
]
PLAIN = [*log_lines(25), "", "    indented line of code = 1", "done.", "{", '  "key": "value",', "}"]

line = st.one_of(st.sampled_from(PLAIN), st.sampled_from(PRESERVED), st.text("abc xyz\t", max_size=30))
# A few large fixed outputs make duplicates (and whitespace-variant duplicates) likely.
FIXED = [
    "\n".join(log_lines(70)),
    "\n".join(log_lines(70)).replace(" ", "  "),
    "Traceback (most recent call last):\n" + "\n".join(f'  File "app/m{i}.py", line {i}' for i in range(30)),
    "\n".join(["diff --git a/x.py b/x.py", *(f"@@ -{i} +{i} @@\n-a{i}\n+b{i}" for i in range(40))]),
    "\n".join([*log_lines(30), *PRESERVED, *log_lines(30, "tail")]),
]
text_body = st.one_of(st.lists(line, max_size=60).map("\n".join), st.sampled_from(FIXED))
tool_names = st.sampled_from(["Bash", "Read", "Write", "Grep"])


@st.composite
def sessions(draw: st.DrawFn) -> list[Msg]:
    messages: list[Msg] = []
    n_rounds = draw(st.integers(1, 6))
    ids = iter(range(10_000))

    def add(role: str, content: Any) -> None:
        messages.append(msg(len(messages) + 1, role, content))

    for _ in range(n_rounds):
        prompt = draw(st.one_of(st.sampled_from(["Go on.", "Fix the failing test."]), text_body))
        if draw(st.booleans()) or not messages:
            add("user", prompt)
        n_calls = draw(st.integers(0, 2))
        blocks: list[dict[str, Any]] = []
        if draw(st.booleans()):
            blocks.append({"type": "text", "text": draw(text_body)})
        calls = []
        for _ in range(n_calls):
            tid, name = f"toolu_{next(ids)}", draw(tool_names)
            args = {"file_path": "src/app.py", "content": draw(text_body)} if name == "Write" else {}
            if name != "Write":
                args = {"command": draw(st.sampled_from(["ls", "pytest -q"])) + "\n" + draw(text_body)}
            calls.append(call(tid, name, **args))
        if not blocks and not calls:
            blocks.append({"type": "text", "text": "Thinking."})
        add("assistant", blocks + calls)
        if calls:
            results = [
                result(c["id"], draw(text_body) if draw(st.booleans()) else [{"type": "text", "text": draw(text_body)}])
                for c in calls
            ]
            add("user", results)
    if draw(st.booleans()):
        add("assistant", "Done for now.")
    return messages


policies = st.builds(
    Policy,
    keep_recent_turns=st.integers(0, 3),
    protect_tool_tokens=st.sampled_from([0, 60, 400, 40_000]),
)


def expected_protected_seqs(messages: list[Msg], keep: int) -> set[int]:
    users = [i for i, m in enumerate(messages) if m.role == "user"]
    protected: set[int] = set()
    if keep > 0:
        start = users[-keep] if len(users) >= keep else 0
        protected |= {m.seq for m in messages[start:]}
    if users:
        protected.add(messages[users[-1]].seq)
    typed = [m.seq for m in messages if m.role == "user" and isinstance(m.content, str) and m.content.strip()]
    if typed:
        protected.add(typed[-1])
    return protected


def expected_protected_results(messages: list[Msg], budget: int) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    total = 0
    for m in reversed(messages):
        if isinstance(m.content, str):
            continue
        for i in reversed(range(len(m.content))):
            if m.content[i]["type"] == "tool_result":
                total += TOK.count_message("user", [m.content[i]]) - TOK.count_message("user", [])
                if total > budget:
                    return found
                found.append((m.seq, i))
    return found


def units(content: str | list[dict[str, Any]]) -> list[str]:
    """Every piece of text a strategy may rewrite, in a fixed order."""
    if isinstance(content, str):
        return [content]
    out = []
    for b in content:
        if b["type"] == "text":
            out.append(b["text"])
        elif b["type"] == "tool_result":
            out.append(result_text(b["content"]))
        elif b["type"] == "tool_use":
            out.extend(v for _, v in sorted(b["input"].items()) if isinstance(v, str))
    return out


def as_dicts(messages: list[Msg]) -> list[dict[str, Any]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def paired_ids(request: list[dict[str, Any]]) -> set[str]:
    """Ids whose tool_use sits in an assistant turn and whose tool_result opens the next user turn."""
    paired = set()
    for prev, cur in itertools.pairwise(request):
        if prev["role"] != "assistant":
            continue
        calls = {b["id"] for b in prev["content"] if b["type"] == "tool_use"}
        results = {b["tool_use_id"] for b in cur["content"] if b["type"] == "tool_result"}
        paired |= calls & results
    for i, turn in enumerate(request):
        for b in turn["content"]:
            if b["type"] == "tool_result":
                assert i and b["tool_use_id"] in paired, "every result still follows its call"
    return paired


@settings(ENGINE)
@given(sessions(), policies, st.sampled_from([2_000, 20_000, 200_000]))
def test_property_pruning_keeps_protected_content_preserved_lines_and_tool_pairs(messages, policy, window):
    original = copy.deepcopy(messages)
    changes = plan_compact(messages, policy, context_window=window, tokenizer=TOK)
    assert messages == original
    assert changes == plan_compact(copy.deepcopy(messages), policy, context_window=window, tokenizer=TOK)
    by_seq = {m.seq: m for m in messages}

    protected = expected_protected_seqs(messages, policy.keep_recent_turns)
    assert not protected & {c.seq for c in changes}
    after = apply_changes(messages, changes)
    after_by_seq = {m.seq: m for m in after}
    for seq, index in expected_protected_results(messages, policy.protected_tool_tokens(window)):
        assert after_by_seq[seq].content[index] == by_seq[seq].content[index]

    for change in changes:
        old = by_seq[change.seq]
        assert change.tokens_before == old.tokens
        assert change.tokens_after == TOK.count_message(old.role, change.content) < change.tokens_before
        assert change.strategy in ("tool_output", "duplicate", "verbose", "pasted_output")
        if isinstance(old.content, list):
            kept = [(b["type"], b.get("id"), b.get("tool_use_id"), b.get("name")) for b in change.content]
            assert kept == [(b["type"], b.get("id"), b.get("tool_use_id"), b.get("name")) for b in old.content]
            for new_block, old_block in zip(change.content, old.content, strict=True):
                if old_block["type"] == "tool_use":
                    assert set(new_block["input"]) == set(old_block["input"])
        else:
            assert isinstance(change.content, str)
        for old_text, new_text in zip(units(old.content), units(change.content), strict=True):
            if new_text != old_text:
                assert MARK in new_text
            new_lines = set(new_text.splitlines())
            for kept_line in matching_lines(old_text):
                assert kept_line in new_lines, f"seq {change.seq} lost the preserved line {kept_line!r}"

    before_request, after_request = to_anthropic_messages(as_dicts(messages)), to_anthropic_messages(as_dicts(after))
    all_ids = {b["id"] for m in messages if isinstance(m.content, list) for b in m.content if b["type"] == "tool_use"}
    assert paired_ids(after_request) == paired_ids(before_request) == all_ids


def test_what_a_person_wrote_stays_and_only_the_log_they_pasted_is_cleared_never_made_a_reference():
    pasted = "Here is the log:\n" + "\n".join(log_lines(80))
    messages = [
        msg(1, "user", pasted),
        msg(2, "assistant", "Looking."),
        msg(3, "user", [{"type": "text", "text": pasted}]),
        msg(4, "assistant", "Same log again; " + "\n".join(log_lines(80))),
        msg(5, "user", "Thanks."),
        msg(6, "assistant", "Anything else?"),
        msg(7, "user", "No."),
    ]
    changes = plan(messages, keep_recent_turns=0)
    assert changes[1].content.startswith(f"Here is the log:\n{MARK} pasted output cleared (")
    assert changes[3].content[0]["text"] == changes[1].content.replace("recall m1 ", "recall m3 ")  # each its own id
    assert {changes[1].strategy, changes[3].strategy} == {"pasted_output"} and not changes[3].refers_to
    assert 4 in changes, "an assistant's long log is still condensed"
