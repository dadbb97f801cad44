"""The fake's Responses API through the real ``openai`` SDK: what it answers, streamed and not, how it
refuses, its window, its compaction and what it records."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fakes.openai_responses import (
    CONTEXT_EXCEEDED,
    DEFAULT_REPLY,
    ResponsesAPI,
    count_input_tokens,
    custom_tool_call,
    function_call,
    message,
    reasoning,
    stream_events,
)
from tests.fakes.openai_server import FakeOpenAI

PATCH = "*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def client(fake: FakeOpenAI) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url=f"{fake.base_url}/v1", max_retries=0)


def scripted_turn() -> list[dict[str, object]]:
    return [
        reasoning("List the files first.", encrypted="SEALED"),
        message("Looking.", phase="commentary"),
        function_call("exec_command", {"cmd": "ls"}, call_id="call_ls"),
        custom_tool_call("apply_patch", PATCH, call_id="call_patch"),
    ]


def test_it_answers_a_response_object_with_usage(fake):
    fake.responses.queue_reply(scripted_turn())
    body = {"model": "gpt-5.5", "input": "Hello there", "instructions": "Be brief."}
    response = client(fake).responses.create(**body)
    assert response.status == "completed"
    assert [i.type for i in response.output] == ["reasoning", "message", "function_call", "custom_tool_call"]
    assert response.output[0].encrypted_content == "SEALED"
    assert response.output[2].arguments == '{"cmd": "ls"}' and response.output[2].call_id == "call_ls"
    assert response.output[3].input == PATCH
    assert response.output_text == "Looking."
    assert response.usage is not None
    assert response.usage.input_tokens == count_input_tokens(body) > 0
    assert response.usage.total_tokens == response.usage.input_tokens + response.usage.output_tokens
    assert 0 < response.usage.output_tokens_details.reasoning_tokens <= response.usage.output_tokens


def test_it_streams_the_events_the_sdk_rebuilds_the_response_from(fake):
    fake.responses.queue_reply(scripted_turn())
    with client(fake).responses.stream(model="gpt-5.5", input="Hi") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    for kind in ("response.output_text.delta", "response.function_call_arguments.delta",
                 "response.custom_tool_call_input.delta", "response.reasoning_summary_text.delta"):  # fmt: skip
        assert kind in kinds
    assert final.output_text == "Looking."
    assert final.output[3].input == PATCH and final.output[2].arguments == '{"cmd": "ls"}'


def test_a_raw_stream_names_each_event_and_numbers_it(fake):
    fake.responses.queue_text("Hello, world, in several pieces of text.")
    raw = client(fake).responses.create(model="gpt-5.5", input="Hi", stream=True)
    events = list(raw)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "Hello, world, in several pieces of text."


def test_without_a_script_it_answers_the_default_reply(fake):
    assert client(fake).responses.create(model="gpt-5.5", input="Hi").output_text == DEFAULT_REPLY


def test_a_responder_decides_from_the_request(fake):
    fake.responses.set_responder(lambda body: [message(f"{len(body['input'])} items")])
    items = [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    assert client(fake).responses.create(model="gpt-5.5", input=items).output_text == "2 items"


def test_it_refuses_an_input_over_its_window_as_openai_does(fake):
    fake.responses.context_window = 50
    with pytest.raises(openai.BadRequestError) as refused:
        client(fake).responses.create(model="gpt-5.5", input="word " * 100)
    assert refused.value.status_code == 400
    assert refused.value.code == "context_length_exceeded"
    assert refused.value.body["message"] == CONTEXT_EXCEEDED
    assert client(fake).responses.create(model="gpt-5.5", input="short").status == "completed"


def test_a_queued_error_comes_back_in_openais_format(fake):
    fake.responses.queue_error(429, "Slow down", code="rate_limit_exceeded")
    with pytest.raises(openai.RateLimitError) as refused:
        client(fake).responses.create(model="gpt-5.5", input="Hi", stream=True)
    assert refused.value.body == {"message": "Slow down", "type": "rate_limit_error", "param": None,
                                  "code": "rate_limit_exceeded"}  # fmt: skip


def test_it_refuses_a_request_without_a_key_or_an_input(fake):
    keyless = openai.OpenAI(api_key="x", base_url=f"{fake.base_url}/v1", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        keyless.responses.create(model="gpt-5.5", input="Hi", extra_headers={"Authorization": ""})
    with pytest.raises(openai.BadRequestError) as refused:
        client(fake).responses.create(model="gpt-5.5")
    assert refused.value.code == "missing_required_parameter"


def test_it_counts_what_the_last_request_of_a_cache_key_began_with_as_cached(fake):
    first = [{"role": "user", "content": "a long first question " * 20}]
    second = [*first, {"role": "assistant", "content": "an answer"}, {"role": "user", "content": "more"}]
    sdk = client(fake)
    one = sdk.responses.create(model="gpt-5.5", input=first, prompt_cache_key="s1")
    two = sdk.responses.create(model="gpt-5.5", input=second, prompt_cache_key="s1")
    other = sdk.responses.create(model="gpt-5.5", input=second, prompt_cache_key="s2")
    assert one.usage and two.usage and other.usage
    assert one.usage.input_tokens_details.cached_tokens == 0
    assert 0 < two.usage.input_tokens_details.cached_tokens < two.usage.input_tokens
    assert other.usage.input_tokens_details.cached_tokens == 0


def test_it_compacts_into_the_users_messages_and_one_sealed_item(fake):
    sdk = client(fake)
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix the bug"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Fixed."}]},
    ]
    compacted = sdk.post("/responses/compact", body={"model": "gpt-5.5", "input": items}, cast_to=object)
    assert isinstance(compacted, dict) and compacted["object"] == "response.compaction"
    kept, sealed = compacted["output"][:-1], compacted["output"][-1]
    assert kept == [items[0]] and sealed["type"] == "compaction"
    assert base64.b64decode(sealed["encrypted_content"]).decode() == fake.responses.compaction_summary
    assert fake.responses.compactions == 1


def test_a_compaction_trigger_is_answered_with_one_compaction_item(fake):
    items = [{"type": "message", "role": "user", "content": "Fix the bug"}, {"type": "compaction_trigger"}]
    with client(fake).responses.stream(model="gpt-5.5", input=items) as stream:
        final = stream.get_final_response()
    assert [i.type for i in final.output] == ["compaction"]
    sealed = final.output[0].model_dump()["encrypted_content"]
    assert base64.b64decode(sealed).decode() == fake.responses.compaction_summary
    assert fake.responses.compactions == 1


def test_it_records_every_request_with_its_headers(fake):
    sdk = client(fake)
    sdk.responses.create(model="gpt-5.5", input="Hi", extra_headers={"session-id": "abc"})
    sdk.responses.create(model="gpt-5.5", input="Again", stream=True).close()
    assert [r["path"] for r in fake.requests] == ["/v1/responses", "/v1/responses"]
    assert fake.requests[0]["headers"]["session-id"] == "abc"
    assert fake.requests[1]["body"]["stream"] is True and fake.requests[1]["body"]["input"] == "Again"


def test_it_keeps_what_it_answered_until_reset(fake):
    fake.responses.set_responder(lambda body: [message("Scripted.")])
    fake.responses.context_window = 10_000
    response = client(fake).responses.create(model="gpt-5.5", input="Hi")
    (answered,) = fake.responses.answered
    assert answered["id"] == response.id and response.usage is not None
    assert answered["usage"]["input_tokens"] == response.usage.input_tokens
    fake.reset()  # as new: nothing recorded, no responder, no window
    assert fake.requests == [] and fake.responses.answered == []
    assert client(fake).responses.create(model="gpt-5.5", input="x" * 50_000).output_text == DEFAULT_REPLY
    assert len(fake.requests) == 1 and len(fake.responses.answered) == 1


text_st = st.text(max_size=60)


@given(st.lists(st.one_of(
    text_st.map(message), text_st.map(reasoning),
    text_st.map(lambda t: function_call("f", {"x": t})), text_st.map(lambda t: custom_tool_call("apply_patch", t)),
), max_size=5))  # fmt: skip
def test_the_deltas_of_a_stream_add_up_to_each_item(items):
    api = ResponsesAPI()
    api.queue_reply(items)
    status, response = api.answer({"model": "gpt-5.5", "input": "Hi"})
    assert status == 200
    events = stream_events(response)
    done = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    assert done == response["output"]
    for index, item in enumerate(done):
        mine = [e for e in events if e.get("output_index") == index and e["type"].endswith(".delta")]
        said = "".join(e["delta"] for e in mine)
        expected = {"message": lambda i: i["content"][0]["text"], "reasoning": lambda i: i["summary"][0]["text"],
                    "function_call": lambda i: i["arguments"], "custom_tool_call": lambda i: i["input"]}  # fmt: skip
        assert said == expected[item["type"]](item)
    assert json.loads(json.dumps(events)) == events
