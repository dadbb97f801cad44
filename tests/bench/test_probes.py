"""The continuation probes of bench/continuation.py (bench/probes.py): pure functions, no database."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from bench import probes
from bench.probes import Score
from compaction.context import to_anthropic_messages, to_openai_messages


def user(text, **metadata):
    return {"role": "user", "content": text, "metadata": metadata}


def call(tool_id, name, **args):
    return {"role": "assistant", "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": args}]}


def result(tool_id, text, *, is_error=None):
    block = {"type": "tool_result", "tool_use_id": tool_id, "content": text}
    if is_error is not None:
        block["is_error"] = is_error
    return {"role": "user", "content": [block]}


def context(*texts, fmt="anthropic"):
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    formatted = to_openai_messages(messages, system=None) if fmt == "openai" else to_anthropic_messages(messages)
    return probes.view(formatted, fmt)


def scores(history, after, *, before=None, usage=None):
    return probes.score(probes.facts_of(history), before, after, usage=usage, target=0.5)


# ----------------------------------------------------------------------------- human messages (probes 1, 2)


def test_only_what_a_person_typed_is_a_human_message():
    history = [
        user("Fix the parser"),
        result("t1", "done"),
        user("Caveat: injected", is_meta=True),
        user("This session is being continued…", is_compact_summary=True),
        user("[ctxweb: 3 messages elided]"),
        user("[Request interrupted by user for tool use]"),
        {"role": "user", "content": [{"type": "text", "text": "  and the lexer  "}]},
        {"role": "assistant", "content": "On it"},
    ]
    assert probes.facts_of(history).humans == ["Fix the parser", "and the lexer"]


@given(st.lists(st.text(alphabet="abcdefgh ", min_size=3, max_size=12).map(str.strip), min_size=2, max_size=6))
def test_a_human_message_removed_from_the_context_lowers_probe_2(texts):
    texts = [f"<{i}:{t}>" for i, t in enumerate(texts)]  # distinct, none inside another
    history = [user(t) for t in texts]
    full = scores(history, context(*texts))
    assert full["human_messages"] == Score(len(texts), len(texts))
    assert full["first_request"] == Score(1, 1)
    dropped = scores(history, context(*texts[1:]))
    assert dropped["human_messages"] == Score(len(texts) - 1, len(texts))
    assert dropped["first_request"] == Score(0, 1)


def test_human_messages_are_searched_in_both_formats_and_the_summary_counts():
    history = [user("Add a test\nfor multiply")]
    summary = "<context_summary>\nLast user request: Add a test\nfor multiply\n</context_summary>"
    for fmt in ("anthropic", "openai"):
        assert scores(history, context(summary, "ok", fmt=fmt))["human_messages"] == Score(1, 1)


def test_a_reflowed_human_message_fails_but_is_told_apart():
    history = [user("Add a test\nfor multiply")]
    after = context("Objective: Add a test for multiply")
    assert scores(history, after)["first_request"] == Score(0, 1)
    assert probes.reflowed(probes.facts_of(history), after) == 1


def test_without_human_messages_probes_1_and_2_do_not_apply():
    result_ = scores([result("t", "x")], context("anything"))
    assert not result_["first_request"].applicable
    assert not result_["human_messages"].applicable


# ----------------------------------------------------------------------------- todo list (probe 3)


def todo_write(tool_id, *items):
    return call(tool_id, "TodoWrite", todos=[{"content": c, "status": s, "activeForm": c} for c, s in items])


def test_the_newest_todo_write_is_the_list():
    history = [todo_write("a", ("Old", "pending")), todo_write("b", ("Fix parser", "in_progress"), ("Ship", "pending"))]
    assert [(i.content, i.status) for i in probes.todo_list(history)] == [
        ("Fix parser", "in_progress"),
        ("Ship", "pending"),
    ]


def test_task_create_and_update_rebuild_the_list():
    history = [
        call("c1", "TaskCreate", subject="Fix parser", description="the lexer too"),
        result("c1", "Task #1 created successfully: Fix parser"),
        call("c2", "TaskCreate", subject="Write docs", description=""),
        result("c2", "Task #2 created successfully: Write docs"),
        call("c3", "TaskCreate", subject="Drop me", description=""),
        result("c3", "Task #7 created successfully: Drop me"),
        call("u1", "TaskUpdate", taskId="1", status="in_progress"),
        call("u2", "TaskUpdate", taskId="7", status="deleted"),
        call("u3", "TaskUpdate", taskId="2", subject="Write the docs"),
    ]
    items = probes.todo_list(history)
    assert [(i.content, i.status) for i in items] == [("Fix parser", "in_progress"), ("Write the docs", "pending")]
    assert [name for name, _ in items[0].calls] == ["TaskCreate", "TaskUpdate"]


def test_update_plan_is_a_todo_list_too():
    history = [call("p", "update_plan", plan=[{"step": "Read the code", "status": "completed"}])]
    assert [(i.content, i.status) for i in probes.todo_list(history)] == [("Read the code", "completed")]


def test_a_todo_item_needs_its_status_on_its_line():
    history = [todo_write("a", ("Fix parser", "in_progress"), ("Ship it", "pending"))]
    assert scores(history, context("- [in_progress] Fix parser\n- Ship it (pending)"))["todo_items"] == Score(2, 2)
    assert scores(history, context("In progress:\n- Fix parser\nPending:\n- Ship it"))["todo_items"] == Score(0, 2)
    assert scores(history, context("- [completed] Fix parser, Ship it"))["todo_items"] == Score(0, 2)


def test_a_todo_call_still_in_the_context_carries_its_items():
    history = [todo_write("a", ("Fix parser", "in_progress")), result("a", "Todos have been modified")]
    formatted = to_anthropic_messages([{"role": m["role"], "content": m["content"]} for m in history])
    assert scores(history, probes.view(formatted, "anthropic"))["todo_items"] == Score(1, 1)
    openai = to_openai_messages([{"role": m["role"], "content": m["content"]} for m in history], system=None)
    assert scores(history, probes.view(openai, "openai"))["todo_items"] == Score(1, 1)


def test_without_a_todo_list_probe_3_does_not_apply():
    assert probes.todo_list([user("hi")]) is None
    assert not scores([user("hi")], context("hi"))["todo_items"].applicable
    assert not scores([todo_write("a")], context("hi"))["todo_items"].applicable


@given(
    st.sampled_from(["pending", "in_progress", "completed"]), st.sampled_from(["pending", "in_progress", "completed"])
)
def test_the_status_nearest_an_item_decides(status, other):
    line = json.dumps([{"content": "Fix parser", "status": status}, {"content": "Ship", "status": other}])
    assert probes.status_beside(line, "Fix parser", status)
    assert probes.status_beside(line, "Ship", other)
    assert probes.status_beside(line, "Fix parser", other) == (status == other)


# ----------------------------------------------------------------------------- files (probe 4)


def test_files_come_from_write_tools_only():
    patch = "*** Begin Patch\n*** Update File: src/a.py\n@@\n*** Add File: src/b.py\n*** End Patch"
    history = [
        call("1", "Write", file_path="/r/new.py", content="x"),
        call("2", "Edit", file_path="/r/old.py", old_string="a", new_string="b"),
        call("3", "Read", file_path="/r/read_only.py"),
        call("4", "str_replace_based_edit_tool", command="view", path="/r/viewed.py"),
        call("5", "str_replace_based_edit_tool", command="str_replace", path="/r/edited.py"),
        call("6", "apply_patch", input=patch),
        call("7", "NotebookEdit", notebook_path="/r/n.ipynb"),
        call("8", "Edit", file_path="/r/old.py", old_string="b", new_string="c"),
    ]
    assert probes.files_modified(history) == [
        "/r/new.py",
        "/r/old.py",
        "/r/edited.py",
        "src/a.py",
        "src/b.py",
        "/r/n.ipynb",
    ]


def test_swe_agent_edits_change_the_file_opened_last():
    history = [
        call("1", "create", filename="reproduce.py"),
        call("2", "insert", text="print(1)"),
        call("3", "open", path="src/fields.py", line_number=10),
        call("4", "edit", search="a", replace="b"),
    ]
    assert probes.files_modified(history) == ["reproduce.py", "src/fields.py"]


def test_a_file_named_in_a_kept_tool_input_counts():
    history = [call("1", "Write", file_path="/r/new.py", content="x"), result("1", "ok")]
    formatted = to_anthropic_messages([{"role": m["role"], "content": m["content"]} for m in history])
    assert scores(history, probes.view(formatted, "anthropic"))["files_modified"] == Score(1, 1)
    assert scores(history, context("nothing here"))["files_modified"] == Score(0, 1)
    assert not scores([user("hi")], context("hi"))["files_modified"].applicable


# ----------------------------------------------------------------------------- failing runs (probe 6)


def test_a_later_passing_run_of_the_same_command_fixes_a_failure():
    history = [
        call("1", "Bash", command="pytest  -x"),
        result("1", "E   AssertionError\n1 failed, 3 passed"),
        call("2", "Bash", command="pytest -x"),
        result("2", "4 passed"),
    ]
    assert probes.unresolved_failure(history) is None
    assert not scores(history, context("x"))["error_lines"].applicable


def test_a_passing_run_of_another_command_does_not_fix_it():
    history = [
        call("1", "Bash", command="pytest -x"),
        result("1", "collected 4 items\nE   AssertionError: 2 != 3\n1 failed, 3 passed"),
        call("2", "Bash", command="ls"),
        result("2", "a.py"),
    ]
    failure = probes.unresolved_failure(history)
    assert failure is not None and failure.key == "Bash pytest -x"
    assert probes.error_lines(failure) == ["E   AssertionError: 2 != 3", "1 failed, 3 passed"]
    assert scores(history, context("E   AssertionError: 2 != 3"))["error_lines"] == Score(1, 2)


def test_the_newest_unfixed_failure_is_the_one_asked_for():
    history = [
        call("1", "Bash", command="make"),
        result("1", "make: *** [all] Error 2", is_error=True),
        call("2", "Bash", command="pytest"),
        result("2", "Traceback (most recent call last):\n  File 'x'\nValueError: bad"),
        call("3", "Bash", command="pytest"),
        result("3", "ok"),
    ]
    failure = probes.unresolved_failure(history)
    assert failure is not None and failure.key == "Bash make"


def test_what_counts_as_a_failed_run():
    failed = [
        {"content": "Exit code 2\nboom"},
        {"content": "exit status 1"},
        {"content": "Process exited with code 137"},
        {"content": "x", "is_error": True},
        {"content": "FAILED tests/test_a.py::test_x - assert 1"},
        {"content": "Error: reservation not found"},
    ]
    passed = [
        {"content": "Exit code 0"},
        {"content": "0 failed, 2 passed"},
        {"content": [{"type": "text", "text": "all good"}]},
        {"content": "x", "is_error": False},
    ]
    assert all(probes.run_failed(r) for r in failed)
    assert not any(probes.run_failed(r) for r in passed)


def test_error_lines_are_the_last_ten_matching_or_the_first_line():
    many = "\n".join(f"error {i}" for i in range(15))
    assert probes.error_lines(probes.Run(0, "k", True, many)) == [f"error {i}" for i in range(5, 15)]
    assert probes.error_lines(probes.Run(0, "k", True, "\n  nothing useful\nmore")) == ["nothing useful"]


def test_runs_without_a_command_are_keyed_by_their_input():
    assert probes.run_key("Read", {"file_path": "a"}) == 'Read {"file_path":"a"}'
    assert probes.run_key("Bash", {"command": "ls   -la\n"}) == "Bash ls -la"


# ----------------------------------------------------------------------------- last three (probe 5), overflow (7)


def test_the_last_three_messages_must_be_unchanged():
    texts = ["A", "B", "C", "D", "E"]
    before = to_anthropic_messages(
        [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    )
    # The summary is a user message: the kept user turn after it merges with it, its blocks unchanged.
    summary = {"type": "text", "text": "<context_summary>…</context_summary>"}
    merged = {"role": "user", "content": [summary, *before[2]["content"]]}
    assert probes.kept_unchanged(before, [merged, *before[3:]]) == Score(3, 3)
    assert probes.kept_unchanged(before, [{"role": "user", "content": [summary]}, *before[3:]]) == Score(2, 3)
    calls = to_anthropic_messages(
        [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "out"}]},
        ]
    )
    cleared = {"role": "user", "content": [{**calls[2]["content"][0], "content": "[cleared]"}]}
    assert probes.kept_unchanged(calls, [*calls[:2], cleared]) == Score(2, 3)
    openai = to_openai_messages([{"role": m["role"], "content": m["content"]} for m in calls], system=None)
    assert probes.kept_unchanged(openai, [{"role": "user", "content": "<context_summary>…"}, *openai]) == Score(3, 3)
    assert probes.kept_unchanged(openai, openai[:2]) == Score(2, 3)


def test_probes_5_and_7_do_not_apply_without_what_they_compare():
    result_ = scores([user("hi")], context("hi"))
    assert not result_["last_three"].applicable
    assert not result_["no_overflow"].applicable
    assert scores([user("hi")], context("hi"), usage=0.5)["no_overflow"] == Score(1, 1)
    assert scores([user("hi")], context("hi"), usage=0.51)["no_overflow"] == Score(0, 1)


# ----------------------------------------------------------------------------- the last prose (probe 8)


def test_the_last_three_pieces_of_prose_are_what_the_user_or_the_assistant_wrote():
    reminder = "<system-reminder>\nCLAUDE.md: run make lint.\n</system-reminder>"
    history = [
        user("Fix the parser"),
        {"role": "assistant", "content": [{"type": "text", "text": " The root cause is the BOM. "}]},
        call("t1", "Bash", command="make test"),
        result("t1", "Exit code 1"),
        user("Caveat: injected", is_meta=True),
        {"role": "user", "content": [{"type": "text", "text": reminder}, {"type": "text", "text": "Keep the API."}]},
        user(reminder),
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Next I'll add a test."},
                {"type": "tool_use", "id": "t2", "name": "Bash", "input": {"command": "make"}},
            ],
        },
        result("t2", "ok"),
        user("[ctxweb: 3 messages elided]"),
    ]
    assert probes.facts_of(history).prose == ["The root cause is the BOM.", "Keep the API.", "Next I'll add a test."]
    assert probes.last_prose(history[:3]) == ["Fix the parser", "The root cause is the BOM."]


def test_a_piece_of_prose_summarized_away_lowers_probe_8_in_either_format():
    history = [user("Fix the parser"), {"role": "assistant", "content": "It is the BOM."}, user("Go on")]
    for fmt in ("anthropic", "openai"):
        kept = scores(history, context("Fix the parser", "It is the BOM.", "Go on", fmt=fmt))
        assert kept["last_prose"] == Score(3, 3)
        summarized = scores(history, context("<context_summary>Fixed the BOM.</context_summary>", fmt=fmt))
        assert summarized["last_prose"] == Score(0, 3)
        quoted = context("<context_summary>[assistant]\nIt is the BOM.</context_summary>", "ok", "Go on", fmt=fmt)
        assert scores(history, quoted)["last_prose"] == Score(2, 3)
