"""The engine never raises on odd input a transcript or a message can carry: todo ids such as "²" or
"①", task numbers in any script, exit codes longer than ``int()`` reads, arbitrary tool inputs.
Every message here is one the ingest accepts (it goes through ``normalize_message``); the facts, the
offline summary, the checkpoint and the handoff are computed from it, folded twice, and rendered."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from compaction.checkpoint import merge_checkpoint, render_summary_text
from compaction.extractive import ExtractiveSummarizer
from compaction.facts import checkpoint_facts, facts_update, render_facts, run_failed
from compaction.handoff import HandoffContext, render_handoff
from compaction.messages import normalize_message
from compaction.tokens import OfflineTokenizer
from compaction.types import Msg

TOK = OfflineTokenizer()
CTX = HandoffContext("p", 1, "s", "m", 1, 1, "2025-01-01T00:00:00+00:00", "http://x", 50.0)
ODD_NUMBERS = ["²", "①", "٣", "߂", "𝟙", "Ⅻ", "¹²", "1" * 5000, "-0", " 7", "7\n", "+3", "1_0", "0x1f", "NaN"]
TOOLS = ["TodoWrite", "TaskCreate", "TaskUpdate", "update_plan", "todowrite", "Bash", "Edit", "Read", "apply_patch"]

# What the ingest stores: no lone surrogate, no NaN or infinity.
texts = st.text(st.characters(blacklist_categories=["Cs"]), max_size=30)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    texts,
    st.sampled_from(ODD_NUMBERS),
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
ids = st.one_of(st.sampled_from(ODD_NUMBERS), texts, st.integers(), json_values)
todo = st.fixed_dictionaries(
    {"content": texts.filter(str.strip), "id": ids, "status": json_values},
    optional={"subject": json_values, "step": json_values},
)
tool_input = st.one_of(
    st.fixed_dictionaries({"todos": st.lists(todo | json_values, max_size=4)}),
    st.fixed_dictionaries({"plan": st.lists(todo | json_values, max_size=4)}),
    st.fixed_dictionaries({"subject": texts.filter(str.strip)}),
    st.fixed_dictionaries({"taskId": ids, "status": json_values, "subject": json_values}),
    st.fixed_dictionaries({"command": json_values, "file_path": json_values, "edits": json_values}),
    st.dictionaries(texts, json_values, max_size=5),
)
results = st.one_of(
    texts,
    st.sampled_from(ODD_NUMBERS).map(lambda n: f"Task #{n} created"),
    st.sampled_from(ODD_NUMBERS).map(lambda n: f"Exit code {n}\nerror: boom"),
    st.lists(st.builds(lambda t: {"type": "text", "text": t}, texts), max_size=3),
)


@st.composite
def sessions(draw: st.DrawFn) -> list[Msg]:
    out: list[Msg] = []
    for i in range(draw(st.integers(1, 5))):
        tid = f"t{i}"
        raw: list[dict[str, Any]] = [
            {"role": "user", "content": draw(texts.filter(str.strip))},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": draw(texts)},
                    {"type": "tool_use", "id": tid, "name": draw(st.sampled_from(TOOLS)), "input": draw(tool_input)},
                ],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": tid,
                        "content": draw(results),
                        "is_error": draw(st.booleans()),
                    }
                ],
            },
        ]
        for message in raw:
            normal = normalize_message(message)
            out.append(Msg(len(out) + 1, normal.role, normal.content, TOK.count_message(normal.role, normal.content)))
    return out


@given(sessions(), st.integers(0, 7))
def test_facts_summary_checkpoint_and_handoff_never_raise(messages, split):
    first = checkpoint_facts(None, messages[:split], TOK, 2_000)
    facts = facts_update(first, messages[split:])
    render_facts(facts)
    fields = ExtractiveSummarizer(TOK).summarize(messages, budget=2_000)
    checkpoint = merge_checkpoint(
        {"facts": first},
        fields,
        messages_compacted=len(messages),
        oldest=None,
        newest=None,
        compacted_at="now",
        facts=facts,
    )
    render_summary_text(checkpoint)
    render_handoff(checkpoint, CTX)


def test_a_todo_numbered_in_another_script_does_not_stop_the_next_task():
    messages = [
        Msg(
            1,
            "assistant",
            [
                {
                    "type": "tool_use",
                    "id": "a",
                    "name": "TodoWrite",
                    "input": {
                        "todos": [
                            {"id": "²", "content": "first", "status": "pending"},
                            {"id": "7", "content": "second", "status": "pending"},
                        ]
                    },
                }
            ],
            1,
        ),
        Msg(2, "assistant", [{"type": "tool_use", "id": "b", "name": "TaskCreate", "input": {"subject": "third"}}], 1),
    ]
    todos = facts_update(None, messages)["todos"]
    assert [(t["id"], t["content"]) for t in todos] == [("²", "first"), ("7", "second"), ("8", "third")]


def test_an_exit_code_too_long_for_int_still_reads_as_a_failure_or_not():
    assert run_failed({"content": "exit code: " + "1" * 5000}) is True
    assert run_failed({"content": "exit code: " + "0" * 5000}) is False
    assert run_failed({"content": "exit code: ٣"}) is False  # not an ASCII exit code: no code at all
