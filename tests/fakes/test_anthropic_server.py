"""The fake Anthropic server, exercised through the real anthropic SDK (2.12.0) over loopback."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import anthropic
import pytest

from . import fixtures as _fixtures
from .anthropic_server import (
    DEFAULT_REPLY,
    FakeAnthropic,
    FakeAnthropicProcess,
    default_count_tokens,
    fetch_requests,
    read_base_url,
    script,
)

# the shared fixtures, made visible to this module (other packages import them in their conftest.py)
fake_anthropic = _fixtures.fake_anthropic
fake_anthropic_env = _fixtures.fake_anthropic_env

MODEL = "claude-haiku-4-5"
MESSAGES: list[anthropic.types.MessageParam] = [{"role": "user", "content": "Hello there"}]
PROJECT_ROOT = Path(__file__).resolve().parents[2]
REQ_ID = re.compile(r"^req_[0-9a-f]{24}$")


def client(server: FakeAnthropic | str, **kwargs) -> anthropic.Anthropic:
    base_url = server if isinstance(server, str) else server.base_url
    kwargs.setdefault("max_retries", 0)
    return anthropic.Anthropic(api_key="test", base_url=base_url, **kwargs)


def create(c: anthropic.Anthropic, **kwargs):
    return c.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, **kwargs)


def raw_post(url: str, body: object, headers: dict[str, str] | None = None) -> tuple[int, dict, object]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={"content-type": "application/json"})
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, {k.lower(): v for k, v in resp.headers.items()}, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, {k.lower(): v for k, v in err.headers.items()}, json.loads(err.read())


# --------------------------------------------------------------------- messages / count_tokens
def test_messages_create_returns_queued_replies_in_order_then_default(fake_anthropic):
    fake_anthropic.queue_reply("first")
    fake_anthropic.queue_reply('{"not": "checked"}', stop_reason="max_tokens", output_tokens=7)
    with client(fake_anthropic) as c:
        r1, r2, r3 = create(c), create(c), create(c)

    assert [r1.content[0].text, r2.content[0].text, r3.content[0].text] == [
        "first",
        '{"not": "checked"}',
        DEFAULT_REPLY,
    ]
    assert r1.stop_reason == "end_turn" and r2.stop_reason == "max_tokens"
    assert r2.usage.output_tokens == 7
    assert r1.usage.output_tokens == math.ceil(len(b"first") / 4)
    assert r1.model == MODEL and r1.role == "assistant" and r1.id.startswith("msg_")

    recorded = fake_anthropic.requests
    assert len(recorded) == 3
    # the SDK exposes the request-id header; each response has its own
    assert [r._request_id for r in (r1, r2, r3)] == [r["request_id"] for r in recorded]
    assert all(REQ_ID.match(r["request_id"]) for r in recorded)
    assert len({r["request_id"] for r in recorded}) == 3
    assert recorded[0]["path"] == "/v1/messages" and recorded[0]["endpoint"] == "messages"
    assert recorded[0]["body"] == {"model": MODEL, "max_tokens": 64, "messages": MESSAGES}
    assert recorded[0]["headers"]["authorization"] == "Bearer test"
    assert recorded[0]["status"] == 200


def test_usage_input_tokens_matches_count_tokens(fake_anthropic):
    system = "You are terse. ü"
    tools = [{"name": "ls", "description": "list files", "input_schema": {"type": "object", "properties": {}}}]
    messages = [
        {"role": "user", "content": "list the files"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.py\nb.py"}]},
    ]
    # the documented formula, computed independently of the server module
    canonical = json.dumps(
        {"messages": messages, "system": system, "tools": tools},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    ).encode()
    expected = math.ceil(len(canonical) / 4) + 3 * len(messages)

    with client(fake_anthropic) as c:
        counted = c.messages.count_tokens(model=MODEL, system=system, tools=tools, messages=messages)
        created = c.messages.create(model=MODEL, max_tokens=10, system=system, tools=tools, messages=messages)

    assert counted.input_tokens == expected
    assert created.usage.input_tokens == expected
    assert default_count_tokens({"system": system, "tools": tools, "messages": messages}) == expected
    # without system/tools the count is smaller (absent keys count as null)
    assert default_count_tokens({"messages": messages}) < expected
    recorded = fake_anthropic.requests_for("count_tokens")
    assert len(recorded) == 1 and recorded[0]["path"] == "/v1/messages/count_tokens"


def test_count_function_and_reply_function_can_be_replaced(fake_anthropic):
    fake_anthropic.set_count_function(lambda body: 1000 + len(body["messages"]))
    fake_anthropic.set_reply_function(lambda body: "echo: " + body["messages"][-1]["content"])
    with client(fake_anthropic) as c:
        assert c.messages.count_tokens(model=MODEL, messages=MESSAGES).input_tokens == 1001
        r = create(c)
    assert r.content[0].text == "echo: Hello there"
    assert r.usage.input_tokens == 1001
    fake_anthropic.reset()
    with client(fake_anthropic) as c:
        assert c.messages.count_tokens(model=MODEL, messages=MESSAGES).input_tokens == default_count_tokens(
            {"messages": MESSAGES}
        )
        assert create(c).content[0].text == DEFAULT_REPLY
    assert len(fake_anthropic.requests) == 2  # reset forgot the earlier ones


def test_queue_message_with_tool_use_and_cache_usage(fake_anthropic):
    fake_anthropic.queue_message(
        [{"type": "tool_use", "id": "toolu_9", "name": "ls", "input": {"path": "."}}],
        stop_reason="tool_use",
        usage={"cache_read_input_tokens": 50},
    )
    with client(fake_anthropic) as c:
        r = create(c)
    assert r.stop_reason == "tool_use"
    assert r.content[0].type == "tool_use" and r.content[0].input == {"path": "."}
    assert r.usage.cache_read_input_tokens == 50


def test_path_prefix_and_beta_query_string(fake_anthropic):
    with client(fake_anthropic.base_url + "/prefix") as c:
        assert create(c).content[0].text == DEFAULT_REPLY
    assert fake_anthropic.requests[-1]["path"] == "/prefix/v1/messages"

    status, headers, body = raw_post(
        fake_anthropic.base_url + "/v1/messages/count_tokens?beta=true",
        {"model": MODEL, "messages": MESSAGES},
        {"x-api-key": "k"},
    )
    assert status == 200 and body == {"input_tokens": default_count_tokens({"messages": MESSAGES})}
    assert fake_anthropic.requests[-1]["query"] == "beta=true"
    assert REQ_ID.match(headers["request-id"])


# --------------------------------------------------------------------- retries and errors
@pytest.mark.parametrize(
    ("status", "error_type"), [(429, "rate_limit_error"), (500, "api_error"), (529, "overloaded_error")]
)
def test_retryable_errors_are_retried_then_succeed(fake_anthropic, status, error_type):
    fake_anthropic.queue_error(status, times=2, retry_after_ms=1)
    fake_anthropic.queue_reply("after retries")
    started = time.monotonic()
    with client(fake_anthropic, max_retries=2) as c:
        r = create(c)
    elapsed = time.monotonic() - started

    assert r.content[0].text == "after retries"
    recorded = fake_anthropic.requests
    assert [x["status"] for x in recorded] == [status, status, 200]
    assert [x["headers"]["x-stainless-retry-count"] for x in recorded] == ["0", "1", "2"]
    # retry-after-ms: 1 was honoured (the SDK's own backoff would take over a second)
    assert elapsed < 1.0
    assert fake_anthropic.pending() == {"replies": 0, "scripted": 0}


def test_error_body_and_headers(fake_anthropic):
    fake_anthropic.queue_error(529, retry_after_ms=5, should_retry=False, message="busy")
    status, headers, body = raw_post(
        fake_anthropic.base_url + "/v1/messages",
        {"model": MODEL, "max_tokens": 5, "messages": MESSAGES},
        {"x-api-key": "k"},
    )
    assert status == 529
    assert body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "busy"},
        "request_id": headers["request-id"],
    }
    assert headers["retry-after-ms"] == "5" and headers["x-should-retry"] == "false"


@pytest.mark.parametrize(
    ("status", "exc_class", "error_type"),
    [
        (400, anthropic.BadRequestError, "invalid_request_error"),
        (401, anthropic.AuthenticationError, "authentication_error"),
    ],
)
def test_client_errors_are_not_retried(fake_anthropic, status, exc_class, error_type):
    fake_anthropic.queue_error(status, times=3)
    with client(fake_anthropic, max_retries=2) as c, pytest.raises(exc_class) as info:
        create(c)
    assert info.value.status_code == status
    assert info.value.type == error_type
    assert info.value.request_id == fake_anthropic.requests[0]["request_id"]
    assert len(fake_anthropic.requests) == 1
    assert fake_anthropic.pending()["scripted"] == 2


def test_overloaded_beyond_max_retries_raises_529(fake_anthropic):
    fake_anthropic.queue_error(529, times=5, retry_after_ms=1)
    with client(fake_anthropic, max_retries=2) as c, pytest.raises(anthropic.InternalServerError) as info:
        create(c)
    assert isinstance(info.value, anthropic.APIStatusError)
    assert info.value.status_code == 529 and info.value.type == "overloaded_error"
    assert len(fake_anthropic.requests) == 3
    assert fake_anthropic.pending()["scripted"] == 2


def test_x_should_retry_overrides_the_sdk(fake_anthropic):
    fake_anthropic.queue_error(500, should_retry=False)
    with client(fake_anthropic, max_retries=2) as c, pytest.raises(anthropic.InternalServerError):
        create(c)
    assert len(fake_anthropic.requests) == 1

    fake_anthropic.reset()
    fake_anthropic.queue_error(400, should_retry=True, retry_after_ms=1)
    with client(fake_anthropic, max_retries=2) as c:
        assert create(c).content[0].text == DEFAULT_REPLY
    assert [r["status"] for r in fake_anthropic.requests] == [400, 200]


def test_errors_can_target_one_endpoint(fake_anthropic):
    fake_anthropic.queue_error(529, endpoint="count_tokens")
    with client(fake_anthropic) as c:
        assert create(c).content[0].text == DEFAULT_REPLY  # messages unaffected
        with pytest.raises(anthropic.APIStatusError) as info:
            c.messages.count_tokens(model=MODEL, messages=MESSAGES)
    assert info.value.status_code == 529
    with pytest.raises(ValueError):
        fake_anthropic.queue_error(500, endpoint="completions")


def test_slow_reply_times_out(fake_anthropic):
    fake_anthropic.set_delay(1.0, endpoint="messages")
    started = time.monotonic()
    with client(fake_anthropic, timeout=0.2) as c, pytest.raises(anthropic.APITimeoutError):
        create(c)
    assert time.monotonic() - started < 0.9
    fake_anthropic.set_delay(0, endpoint="messages")
    with client(fake_anthropic, timeout=2) as c:
        assert c.messages.count_tokens(model=MODEL, messages=MESSAGES).input_tokens > 0


def test_malformed_json_body(fake_anthropic):
    fake_anthropic.queue_malformed_json_body(endpoint="messages")
    with client(fake_anthropic) as c:
        with pytest.raises(json.JSONDecodeError):
            create(c)
        assert create(c).content[0].text == DEFAULT_REPLY  # only once


# --------------------------------------------------------------------- credentials and validation
def test_both_credential_headers_accepted_and_missing_ones_refused(fake_anthropic):
    url = fake_anthropic.base_url + "/v1/messages"
    body = {"model": MODEL, "max_tokens": 5, "messages": MESSAGES}
    status, _, reply = raw_post(url, body, {"x-api-key": "sk-test", "anthropic-version": "2023-06-01"})
    assert status == 200 and reply["type"] == "message"
    status, _, reply = raw_post(url, body, {"authorization": "Bearer sk-test"})
    assert status == 200 and reply["content"][0]["text"] == DEFAULT_REPLY
    status, headers, reply = raw_post(url, body)
    assert status == 401
    assert reply["error"]["type"] == "authentication_error"
    assert reply["request_id"] == headers["request-id"]
    status, _, reply = raw_post(url, body, {"authorization": "Basic abc"})
    assert status == 401
    assert fake_anthropic.requests[0]["headers"]["x-api-key"] == "sk-test"


def test_required_api_key():
    with FakeAnthropic(api_key="right") as server:
        with (
            anthropic.Anthropic(api_key="wrong", base_url=server.base_url, max_retries=0) as c,
            pytest.raises(anthropic.AuthenticationError),
        ):
            create(c)
        with anthropic.Anthropic(api_key="right", base_url=server.base_url, max_retries=0) as c:
            assert create(c).content[0].text == DEFAULT_REPLY


@pytest.mark.parametrize(
    ("path", "body", "fragment"),
    [
        ("/v1/messages", {"model": MODEL, "messages": MESSAGES}, "max_tokens"),
        ("/v1/messages", {"model": MODEL, "max_tokens": "5", "messages": MESSAGES}, "max_tokens"),
        ("/v1/messages", {"max_tokens": 5, "messages": MESSAGES}, "model"),
        ("/v1/messages", {"model": MODEL, "max_tokens": 5, "messages": []}, "messages"),
        ("/v1/messages", {"model": MODEL, "max_tokens": 5, "messages": [{"role": "system", "content": "x"}]}, "role"),
        ("/v1/messages", {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": 3}]}, "content"),
        ("/v1/messages", {"model": MODEL, "max_tokens": 5, "messages": MESSAGES, "stream": "yes"}, "stream"),
        ("/v1/messages", [1, 2], "JSON object"),
        ("/v1/messages", b"{not json", "not valid JSON"),
        ("/v1/messages/count_tokens", {"model": MODEL, "messages": "hi"}, "messages"),
        ("/v1/messages/count_tokens", {"model": MODEL, "max_tokens": 5, "messages": MESSAGES}, "max_tokens"),
    ],
)
def test_validation(fake_anthropic, path, body, fragment):
    status, _, reply = raw_post(fake_anthropic.base_url + path, body, {"x-api-key": "k"})
    assert status == 400
    assert reply["error"]["type"] == "invalid_request_error"
    assert fragment in reply["error"]["message"]
    assert fake_anthropic.requests[-1]["status"] == 400


def test_validation_through_the_sdk_is_a_bad_request(fake_anthropic):
    with client(fake_anthropic) as c, pytest.raises(anthropic.BadRequestError) as info:
        c.messages.create(model=MODEL, max_tokens=5, messages=[])
    assert "messages" in info.value.api_message


def test_unknown_path_is_404(fake_anthropic):
    status, _, reply = raw_post(fake_anthropic.base_url + "/v1/complete", {"x": 1}, {"x-api-key": "k"})
    assert status == 404 and reply["error"]["type"] == "not_found_error"


def test_fixture_env(fake_anthropic_env, monkeypatch):
    with anthropic.Anthropic(max_retries=0) as c:  # from ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY
        assert create(c).content[0].text == DEFAULT_REPLY
    assert fake_anthropic_env.requests[0]["headers"]["authorization"] == "Bearer test"


# --------------------------------------------------------------------- control endpoint and script mode
def test_control_endpoint_in_process(fake_anthropic):
    script(fake_anthropic.base_url, action="queue_reply", text="scripted")
    script(fake_anthropic.base_url, action="set_fixed_count", input_tokens=77)
    with client(fake_anthropic) as c:
        r = create(c)
    assert r.content[0].text == "scripted" and r.usage.input_tokens == 77
    recorded = fetch_requests(fake_anthropic.base_url)
    assert len(recorded) == 1 and recorded[0]["body"]["messages"] == MESSAGES  # control calls not recorded
    with pytest.raises(RuntimeError, match="unknown action"):
        script(fake_anthropic.base_url, action="explode")
    with pytest.raises(RuntimeError, match="queue_error"):
        script(fake_anthropic.base_url, action="queue_error", status=529, nonsense=1)


def test_script_mode_subprocess():
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.anthropic_server", "--port", "0"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = read_base_url(proc, timeout=10)
        assert re.match(r"^http://127\.0\.0\.1:\d+$", base_url) and not base_url.endswith(":0")
        script(base_url, action="queue_error", status=529, times=2, retry_after_ms=1, endpoint="count_tokens")
        script(base_url, action="queue_reply", text="from another process")
        with client(base_url, max_retries=2) as c:
            assert c.messages.count_tokens(model=MODEL, messages=MESSAGES).input_tokens == default_count_tokens(
                {"messages": MESSAGES}
            )
            r = create(c)
        assert r.content[0].text == "from another process"
        recorded = fetch_requests(base_url)
        assert [(x["endpoint"], x["status"]) for x in recorded] == [
            ("count_tokens", 529),
            ("count_tokens", 529),
            ("count_tokens", 200),
            ("messages", 200),
        ]
        assert r._request_id == recorded[-1]["request_id"]
        script(base_url, action="reset")
        assert fetch_requests(base_url) == []
    finally:
        proc.terminate()
        assert proc.wait(timeout=5) == 0  # SIGTERM is a clean exit
        proc.stdout.close()


def test_fake_anthropic_process_helper():
    with FakeAnthropicProcess(api_key="k1") as proc:
        proc.script(action="set_delay", seconds=0.5)
        with (
            anthropic.Anthropic(api_key="k1", base_url=proc.base_url, max_retries=0, timeout=0.1) as c,
            pytest.raises(anthropic.APITimeoutError),
        ):
            create(c)
        proc.script(action="set_delay", seconds=0)
        with anthropic.Anthropic(api_key="k1", base_url=proc.base_url, max_retries=0) as c:
            assert create(c).content[0].text == DEFAULT_REPLY
        assert len(proc.requests()) == 2
        process = proc.process
    assert process.poll() is not None


# --------------------------------------------------------------------- streaming


TOOL_REPLY = [
    {"type": "text", "text": "I'll read the file first, then run the tests that cover it."},
    {"type": "tool_use", "id": "toolu_01A", "name": "Read", "input": {"path": "src/app.py", "lines": [1, 80]}},
]


def test_a_stream_carries_the_same_message_as_a_plain_answer(fake_anthropic):
    usage = {"cache_read_input_tokens": 120, "cache_creation_input_tokens": 7}
    fake_anthropic.queue_message(TOOL_REPLY, stop_reason="tool_use", usage=usage)
    fake_anthropic.queue_message(TOOL_REPLY, stop_reason="tool_use", usage=usage)
    with client(fake_anthropic) as c:
        plain = create(c)
        with c.messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as stream:
            streamed = stream.get_final_message()
    assert streamed.model_dump(exclude={"id"}) == plain.model_dump(exclude={"id"})
    assert streamed.usage.input_tokens == default_count_tokens({"messages": MESSAGES}) > 0
    assert streamed.usage.cache_read_input_tokens == 120
    assert fake_anthropic.requests[-1]["body"]["stream"] is True


def test_the_events_come_in_the_order_the_api_sends_them(fake_anthropic):
    fake_anthropic.queue_message(TOOL_REPLY, stop_reason="tool_use")
    with client(fake_anthropic) as c:
        events = list(c.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True))
    kinds = [e.type for e in events]  # (the SDK drops the ping; the wire test below sees it)
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert events[0].message.stop_reason is None and events[0].message.content == []
    # each block: start, its deltas, stop; a text block's deltas are text, a tool call's its input as JSON
    for index, block in enumerate(TOOL_REPLY):
        mine = [e for e in events if getattr(e, "index", None) == index]
        assert mine[0].type == "content_block_start" and mine[-1].type == "content_block_stop"
        deltas = [e.delta for e in mine[1:-1]]
        assert len(deltas) > 1 and all(e.type == "content_block_delta" for e in mine[1:-1])
        if block["type"] == "text":
            assert "".join(d.text for d in deltas) == block["text"]
        else:
            assert json.loads("".join(d.partial_json for d in deltas)) == block["input"]
    assert events[-2].delta.stop_reason == "tool_use" and events[-2].usage.output_tokens > 1


def test_a_scripted_error_comes_before_the_stream_as_json(fake_anthropic):
    fake_anthropic.queue_error(529, endpoint="messages")
    with client(fake_anthropic) as c, pytest.raises(anthropic.APIStatusError) as info:
        list(c.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True))
    assert info.value.status_code == 529


def test_an_error_in_the_middle_of_a_stream_reaches_the_sdk(fake_anthropic):
    fake_anthropic.queue_stream_error(after_events=4, error_type="overloaded_error", message="Overloaded")
    seen = []
    with client(fake_anthropic) as c, pytest.raises(anthropic.APIStatusError) as info:
        for event in c.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True):
            seen.append(event.type)
    assert len(seen) == 3 and "overloaded" in str(info.value.body).lower()  # 4 events on the wire, a ping among them


def test_a_cut_stream_ends_the_sdks_read_with_an_error(fake_anthropic):
    fake_anthropic.queue_stream_cut(after_events=3)
    seen = []
    with client(fake_anthropic) as c, pytest.raises(Exception) as info:  # httpx's or the SDK's
        for event in c.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True):
            seen.append(event.type)
    assert len(seen) == 2  # 3 events on the wire, a ping among them
    assert "message_stop" not in seen
    # httpx's "incomplete chunked read" (the SDK passes a transport error met while iterating through)
    assert isinstance(info.value, anthropic.APIConnectionError) or "incomplete chunked read" in str(info.value)
    # the server is still fine afterwards
    with client(fake_anthropic) as c:
        assert create(c).content[0].text == DEFAULT_REPLY


def test_streaming_is_scriptable_out_of_process():
    with FakeAnthropicProcess() as proc:
        proc.script(action="queue_stream_error", after_events=2)
        with client(proc.base_url) as c, pytest.raises(anthropic.APIStatusError):
            list(c.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES, stream=True))


def test_on_the_wire_a_stream_is_chunked_server_sent_events_with_a_ping(fake_anthropic):
    fake_anthropic.queue_reply("Hello")
    body = {"model": MODEL, "max_tokens": 5, "messages": MESSAGES, "stream": True}
    req = urllib.request.Request(
        fake_anthropic.base_url + "/v1/messages",
        data=json.dumps(body).encode(),
        method="POST",
        headers={"content-type": "application/json", "x-api-key": "k"},
    )
    with urllib.request.urlopen(req, timeout=5) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        assert resp.headers["Transfer-Encoding"] == "chunked" and REQ_ID.match(resp.headers["request-id"])
        text = resp.read().decode()
    events = [block.split("\n") for block in text.strip().split("\n\n")]
    names = [lines[0].removeprefix("event: ") for lines in events]
    assert names == ["message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]  # fmt: skip
    assert all(
        json.loads(lines[1].removeprefix("data: "))["type"] == name for name, lines in zip(names, events, strict=True)
    )
