"""The OpenAI summarizer against the fake OpenAI server, through the real ``openai`` SDK: the same
prompt, checkpoint schema and repair attempt as the Anthropic one, 4xx permanent, 429/5xx and
timeouts transient, and one deadline over the whole call, retries included."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from compaction.checkpoint import CheckpointError, validate_fields
from compaction.errors import ProviderError
from compaction.openai_summarizer import OpenAISummarizer
from compaction.policy import Policy
from compaction.summarize import SYSTEM_PROMPT, plan_summarize
from compaction.tokens import OfflineTokenizer
from compaction.types import Msg
from tests.drip_server import dripping
from tests.fakes.openai_server import FakeOpenAI

TOK = OfflineTokenizer()
TIMEOUT = 1.0

VALID = {
    "objective": "Ship the CSV importer",
    "narrative": "Wrote the parser, then batching.",
    "completed": ["parser"],
    "in_progress": ["batching"],
    "pending": ["CLI"],
    "blockers": [],
    "decisions": [{"decision": "Batches of 500", "rationale": "memory"}],
    "files_modified": [{"path": "importer/csv.py", "what": "new"}],
    "important_details": ["make test"],
    "last_user_request": "Make it resumable.",
}


def msg(seq: int, role: str, content: str | list[dict[str, Any]]) -> Msg:
    return Msg(seq, role, content, TOK.count_message(role, content))


def work_session() -> list[Msg]:
    call = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "pytest -q"}}
    done = {"type": "tool_result", "tool_use_id": "t1", "content": "collected 3 items\n3 passed"}
    return [
        msg(1, "user", "Add a CSV importer in importer/csv.py."),
        msg(2, "assistant", [call]),
        msg(3, "user", [done]),
        msg(4, "assistant", "The parser works."),
        msg(5, "user", "Now make it resumable."),
    ]


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


def summarizer(base_url: str, *, timeout: float = 30.0, max_retries: int = 0, key: str = "sk-test") -> OpenAISummarizer:
    return OpenAISummarizer(
        api_key=key, model="gpt-4o-mini", base_url=base_url, timeout=timeout, max_retries=max_retries
    )


def v1(server: FakeOpenAI) -> str:
    return f"{server.base_url}/v1"


def completions(server: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in server.requests if r["path"].endswith("/chat/completions")]


def test_a_valid_reply_becomes_validated_fields(server):
    server.queue_reply("```json\n" + json.dumps(VALID) + "\n```")
    fields = summarizer(v1(server), key="sk-project-7890").summarize(work_session(), budget=400)
    assert fields == validate_fields(VALID)
    (request,) = completions(server)
    body = request["body"]
    assert request["headers"]["authorization"] == "Bearer sk-project-7890"
    assert body["model"] == "gpt-4o-mini"
    assert body["max_completion_tokens"] == 1_200
    assert body["response_format"] == {"type": "json_object"}
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][0]["content"] == SYSTEM_PROMPT, "the same instructions as the Anthropic summarizer"
    prompt = body["messages"][1]["content"]
    assert prompt.startswith("Previous checkpoint:\n(none: first compaction)")
    assert "<message seq=1 role=user>\nAdd a CSV importer in importer/csv.py.\n</message>" in prompt
    assert "about 400 tokens" in prompt


def test_its_name_says_provider_and_model():
    assert summarizer("http://127.0.0.1:9/v1").name == "openai:gpt-4o-mini"


def test_a_malformed_reply_is_repaired_once(server):
    server.queue_reply("Here is a summary: the user wants an importer.")
    server.queue_reply(json.dumps(VALID))
    fields = summarizer(v1(server)).summarize(work_session(), budget=400)
    assert fields["objective"] == VALID["objective"]
    first, second = completions(server)
    assert second["body"]["messages"][:2] == first["body"]["messages"]
    assert [m["role"] for m in second["body"]["messages"]] == ["system", "user", "assistant", "user"]
    assert second["body"]["messages"][2]["content"] == "Here is a summary: the user wants an importer."
    repair = second["body"]["messages"][3]["content"]
    assert "not usable" in repair and "Reply with only the JSON object" in repair


def test_a_reply_off_the_schema_is_repaired_too(server):
    server.queue_reply(json.dumps({"completed": "everything"}))
    server.queue_reply(json.dumps(VALID))
    assert summarizer(v1(server)).summarize(work_session(), budget=400)["objective"] == VALID["objective"]
    repair = completions(server)[1]["body"]["messages"][3]["content"]
    assert "'objective' is missing" in repair and "'completed' must be a list" in repair


def test_two_malformed_replies_are_a_permanent_checkpoint_error(server):
    server.queue_reply("not JSON")
    server.queue_reply("still not JSON, sorry")
    with pytest.raises(CheckpointError) as info:
        summarizer(v1(server)).summarize(work_session(), budget=400)
    assert info.value.permanent is True and info.value.code == "invalid_summary"
    assert "after one repair attempt" in str(info.value)
    assert len(completions(server)) == 2


def test_an_empty_answer_is_repaired_with_a_placeholder_turn(server):
    server.queue_message(None)
    server.queue_reply(json.dumps(VALID))
    summarizer(v1(server)).summarize(work_session(), budget=400)
    assert completions(server)[1]["body"]["messages"][2]["content"] == "(empty reply)"


@pytest.mark.parametrize(
    ("status", "permanent"),
    [(400, True), (401, True), (403, True), (404, True), (429, False), (500, False), (503, False)],
)
def test_api_errors_become_provider_errors_that_say_whether_to_retry(server, status, permanent):
    server.queue_error(status)
    with pytest.raises(ProviderError) as info:
        summarizer(v1(server)).summarize(work_session(), budget=400)
    error = info.value
    assert (error.permanent, error.status, error.code) == (permanent, status, "provider_error")
    assert str(error).startswith(f"OpenAI API {status}: ")
    assert len(completions(server)) == 1, "the SDK never retries on its own"


def test_a_transient_error_is_retried_within_the_timeout(server):
    server.queue_error(503)
    server.queue_reply(json.dumps(VALID))
    fields = summarizer(v1(server), timeout=5.0, max_retries=2).summarize(work_session(), budget=400)
    assert fields["objective"] == VALID["objective"]
    assert len(completions(server)) == 2


def test_a_permanent_error_is_not_retried(server):
    server.queue_error(400)
    with pytest.raises(ProviderError):
        summarizer(v1(server), timeout=5.0, max_retries=2).summarize(work_session(), budget=400)
    assert len(completions(server)) == 1


def test_nothing_listening_is_a_transient_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(ProviderError) as info:
        summarizer(f"http://127.0.0.1:{port}/v1").summarize(work_session(), budget=400)
    assert info.value.permanent is False and isinstance(info.value.__cause__, openai.APIConnectionError)


COMPLETION = json.dumps(
    {
        "id": "chatcmpl-drip",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": '{"objective": "x"}'}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
).encode()


def head(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)


@pytest.mark.parametrize(
    ("fast", "slow"), [(b"", head(COMPLETION) + COMPLETION), (head(COMPLETION), COMPLETION)], ids=["status", "body"]
)
def test_a_dripping_answer_is_cut_off_at_the_timeout_retries_included(fast, slow):
    with dripping(fast, slow) as where:
        started = time.monotonic()
        with pytest.raises(ProviderError) as info:
            summarizer(f"http://{where}/v1", timeout=TIMEOUT, max_retries=2).summarize(work_session(), budget=400)
        took = time.monotonic() - started
    assert info.value.permanent is False and isinstance(info.value.__cause__, openai.APITimeoutError), info.value
    assert TIMEOUT * 0.9 <= took < TIMEOUT + 1


def test_plan_summarize_with_the_openai_summarizer(server):
    server.queue_reply(json.dumps(VALID))
    messages = [msg(i + 1, "user" if i % 2 == 0 else "assistant", f"step {i + 1}: " + "word " * 80) for i in range(20)]
    plan = plan_summarize(
        messages,
        Policy(keep_recent_messages=4, summary_budget=500, summarizer_provider="openai", summarizer_model="gpt-4o"),
        context_window=20_000,
        tokenizer=TOK,
        summarizer=summarizer(v1(server)),
        now="2026-01-01T00:00:00+00:00",
        force=True,
    )
    assert plan.checkpoint["objective"] == VALID["objective"] and plan.checkpoint["version"] == 1
    assert plan.checkpoint["facts"]["first_request"].startswith("step 1:"), "the facts come from the messages"
    assert plan.summarized_seqs == [m.seq for m in messages[:-4]]
