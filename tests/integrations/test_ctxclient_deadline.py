"""The client's timeout is the whole request's: a server that drips its answer a byte every 0.2 s
(headers or body) raises ``Unreachable`` at the timeout, not when it stops dripping; with a retry
budget, no request outlives the budget. The Claude Code hook sends through this client."""

from __future__ import annotations

import time

import pytest

from ctxclient import Client, CtxError, Retry, Unreachable
from tests.drip_server import dripping

BODY = b'{"results": [], "next": null}'
SLOW_HEADERS = (b"", b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 29\r\n\r\n" + BODY)
SLOW_BODY = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 29\r\n\r\n", BODY)


@pytest.mark.parametrize(("fast", "slow"), [SLOW_HEADERS, SLOW_BODY], ids=["headers", "body"])
def test_a_dripping_server_is_cut_off_at_the_timeout(fast, slow):
    with dripping(fast, slow) as where:
        started = time.monotonic()
        with pytest.raises(Unreachable, match="timed out"):
            Client(f"http://{where}", "ctx_key", timeout=1.0).request("GET", "sessions/")
        took = time.monotonic() - started
    assert 0.9 <= took < 1.6


def test_retries_of_a_dripping_server_end_within_the_budget():
    with dripping(*SLOW_BODY) as where:
        started = time.monotonic()
        with pytest.raises(CtxError):
            Client(f"http://{where}", "ctx_key", timeout=10, retry=Retry.within(2.0)).request("GET", "sessions/")
        took = time.monotonic() - started
    assert took < 2.6


def test_an_answer_in_time_is_read_whole():
    with dripping(SLOW_BODY[0] + BODY, b"") as where:
        assert Client(f"http://{where}", "ctx_key", timeout=1.0).request("GET", "sessions/") == {
            "results": [],
            "next": None,
        }
