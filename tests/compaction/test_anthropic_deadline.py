"""A call to Anthropic through the SDK ends within its timeout in all, retries included: an upstream
that drips its answer a byte every 0.2 s (the status line, the body, or the TLS handshake) is cut
off at the timeout, not served for as long as it drips (``tests.drip_server``, 6 s); and a retry
whose wait would pass the timeout is not made."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import anthropic
import pytest

from compaction.errors import ProviderError
from compaction.summarize import AnthropicSummarizer
from compaction.tokens import ExactCounter
from compaction.types import Msg
from tests.drip_server import dripping
from tests.fakes.anthropic_server import FakeAnthropic

TIMEOUT = 1.0

MESSAGE = json.dumps(
    {
        "id": "msg_drip",
        "type": "message",
        "role": "assistant",
        "model": "claude-haiku-4-5",
        "content": [{"type": "text", "text": '{"objective": "dripped"}'}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }
).encode()
COUNT = b'{"input_tokens": 7}' + b" " * 100  # long enough to drip past the timeout


def head(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n" % len(body)


def cases(body: bytes) -> list[tuple[str, bytes, bytes]]:
    tls = b"\x16\x03\x03\x40\x00" + b"\x00" * 1000  # a TLS record header, then its 16 KiB body, slowly
    return [("http", b"", head(body) + body), ("http", head(body), body), ("https", b"", tls)]


IDS = ["status-line", "body", "tls-handshake"]


def summarize(base_url: str, *, timeout: float, max_retries: int) -> dict[str, Any]:
    summarizer = AnthropicSummarizer(
        api_key="k", model="claude-haiku-4-5", base_url=base_url, timeout=timeout, max_retries=max_retries
    )
    return summarizer.summarize([Msg(seq=1, role="user", content="Add a CSV importer.", tokens=8)], budget=400)


def count(base_url: str, *, timeout: float, max_retries: int) -> int:
    counter = ExactCounter(api_key="k", base_url=base_url, timeout=timeout, max_retries=max_retries)
    return counter.count_request(model="m", system=None, tools=None, messages=[{"role": "user", "content": "hi"}])


def timed(call: Callable[[], object]) -> tuple[ProviderError, float]:
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        call()
    return info.value, time.monotonic() - started


@pytest.mark.parametrize(("scheme", "fast", "slow"), cases(MESSAGE), ids=IDS)
def test_a_dripping_summary_is_cut_off_at_the_timeout(scheme, fast, slow):
    with dripping(fast, slow) as where:
        error, took = timed(lambda: summarize(f"{scheme}://{where}", timeout=TIMEOUT, max_retries=0))
    assert error.permanent is False and isinstance(error.__cause__, anthropic.APITimeoutError), error
    assert TIMEOUT * 0.9 <= took < TIMEOUT + 1


@pytest.mark.parametrize(("scheme", "fast", "slow"), cases(COUNT), ids=IDS)
def test_a_dripping_count_is_cut_off_at_the_timeout_retries_included(scheme, fast, slow):
    with dripping(fast, slow) as where:
        error, took = timed(lambda: count(f"{scheme}://{where}", timeout=TIMEOUT, max_retries=2))
    assert error.permanent is False and isinstance(error.__cause__, anthropic.APITimeoutError), error
    assert TIMEOUT * 0.9 <= took < TIMEOUT + 1


def test_a_retry_that_fits_is_made():
    with FakeAnthropic() as fake:
        fake.queue_error(529, endpoint="count_tokens", retry_after_ms=50, times=2)
        assert count(fake.base_url, timeout=5.0, max_retries=2) > 0
        assert len(fake.requests_for("count_tokens")) == 3


def test_a_retry_whose_wait_passes_the_timeout_is_not_made():
    with FakeAnthropic() as fake:
        fake.queue_error(429, endpoint="count_tokens", retry_after_ms=60_000)
        error, took = timed(lambda: count(fake.base_url, timeout=TIMEOUT, max_retries=2))
        assert (error.permanent, error.status, took < 0.5) == (False, 429, True)
        assert len(fake.requests_for("count_tokens")) == 1


def test_the_api_may_say_not_to_retry():
    with FakeAnthropic() as fake:
        fake.queue_error(529, endpoint="messages", retry_after_ms=1, should_retry=False)
        error, _ = timed(lambda: summarize(fake.base_url, timeout=5.0, max_retries=2))
        assert error.status == 529 and len(fake.requests_for("messages")) == 1


def test_a_quick_answer_is_not_held_to_the_timeout():
    with FakeAnthropic() as fake:
        fake.queue_reply(json.dumps({"objective": "Import CSV files."}))
        started = time.monotonic()
        assert summarize(fake.base_url, timeout=TIMEOUT, max_retries=0)["objective"] == "Import CSV files."
        assert count(fake.base_url, timeout=TIMEOUT, max_retries=0) > 0
        assert time.monotonic() - started < TIMEOUT
