import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from compaction.context import to_anthropic_messages, to_openai_messages
from tests import hostile_json as hj
from tests.hypothesis_budget import ENGINE


def assert_valid_anthropic(messages):
    assert messages and messages[0]["role"] == "user"
    for prev, cur in itertools.pairwise(messages):
        assert prev["role"] != cur["role"], "roles alternate"
    for i, msg in enumerate(messages):
        results = [b for b in msg["content"] if b["type"] == "tool_result"]
        if results:
            assert msg["role"] == "user"
            calls = {b["id"] for b in messages[i - 1]["content"] if b["type"] == "tool_use"} if i else set()
            assert {b["tool_use_id"] for b in results} <= calls
            first_other = next(
                (k for k, b in enumerate(msg["content"]) if b["type"] != "tool_result"), len(msg["content"])
            )
            assert all(b["type"] != "tool_result" for b in msg["content"][first_other:]), "results come first"
        calls = [b["id"] for b in msg["content"] if b["type"] == "tool_use"]
        if calls and i + 1 < len(messages):
            answered = {b["tool_use_id"] for b in messages[i + 1]["content"] if b["type"] == "tool_result"}
            assert set(calls) <= answered
        assert all(b.get("text", "x") for b in msg["content"])


ids = st.sampled_from(["a", "b", "c", "d"])
block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=5)),
    st.builds(lambda i: {"type": "tool_use", "id": i, "name": "f", "input": {}}, ids),
    st.builds(lambda i: {"type": "tool_result", "tool_use_id": i, "content": "r"}, ids),
)
message = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant", "tool", "system"]),
    st.one_of(st.text(max_size=5), st.lists(block, max_size=4)),
)


@settings(ENGINE)
@given(st.lists(message, min_size=1, max_size=12))
def test_any_message_sequence_becomes_a_valid_request(messages):
    assert_valid_anthropic(to_anthropic_messages(messages))


@given(st.lists(message, min_size=1, max_size=12))
def test_nothing_is_dropped(messages):
    out = to_anthropic_messages(messages)
    texts_in = [
        b["text"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "text" and b["text"]
    ]
    flat = "\n".join(b.get("text", "") for m in out for b in m["content"])
    for text in texts_in:
        assert text in flat


def test_openai_format_maps_calls_and_results():
    out = to_openai_messages(
        [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "f", "input": {"a": 1}}]},
            {"role": "tool", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"}]},
        ],
        system="sys",
    )
    assert out[0] == {"role": "system", "content": "sys"}
    assert out[2]["tool_calls"][0]["function"] == {"name": "f", "arguments": '{"a": 1}'}
    assert out[3] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}


other_message = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant", "tool", "system"]),
    st.lists(
        st.one_of(
            block,
            hj.other_block(),
            st.builds(
                lambda i, inner: {"type": "tool_result", "tool_use_id": i, "content": inner},
                ids,
                st.lists(st.one_of(hj.tool_reference_block, hj.other_block()), max_size=2),
            ),
        ),
        max_size=4,
    ),
)


@settings(ENGINE)
@given(st.lists(other_message, min_size=1, max_size=8))
def test_blocks_of_types_not_read_reach_both_formats(messages):
    """As they came in an Anthropic request; as text in an OpenAI one, which has no such parts."""
    others = [b for m in messages for b in m["content"] if b["type"] not in hj.READ_BLOCK_TYPES]
    anthropic = to_anthropic_messages(messages)
    assert_valid_anthropic(anthropic)
    for b in (b for m in messages if m["role"] != "system" for b in m["content"]):  # a system one is text
        if b["type"] not in hj.READ_BLOCK_TYPES:
            assert any(b in m["content"] for m in anthropic)
    openai = to_openai_messages(messages, system=None)
    for m in openai:
        content = m.get("content")
        assert content is None or isinstance(content, str) or all(p["type"] in ("text", "image_url") for p in content)
    said = json.dumps(openai, ensure_ascii=False)
    results = [b["content"] for m in messages for b in m["content"] if b["type"] == "tool_result"]
    nested = [p for content in results if isinstance(content, list) for p in content]
    for b in [*others, *nested]:
        assert json.dumps(f"[{b['type']}]", ensure_ascii=False)[1:-1] in said, b
