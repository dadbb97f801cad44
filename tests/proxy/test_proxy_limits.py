"""What one proxied exchange may cost to record (``CTX_PROXY_RECORD_MAX_BYTES``, set small here): a
larger request is still forwarded and answered, and noted on its session rather than parsed; a
larger answer reaches the caller whole and is recorded up to the limit, with a note; a chunked
request is forwarded whole where the server reads it, refused (411) where it can't — never
forwarded empty."""

from __future__ import annotations

import http.client
import io
import json
import socket
from typing import Any
from urllib.parse import urlsplit

import pytest

from sessions_app.api.proxy.body import head_of
from sessions_app.models import AgentSession, Message
from tests.fakes.anthropic_server import FakeAnthropic
from tests.proxy_client import assert_sessions_read_back

pytestmark = pytest.mark.django_db

LIMIT = 4000
PATH = "/proxy/anthropic/v1/messages"


@pytest.fixture
def upstream(settings: Any) -> Any:
    settings.CTX_PROXY_RECORDERS = 0  # recorded in the request's thread: the test's transaction sees it
    settings.CTX_PROXY_RECORD_MAX_BYTES = LIMIT
    with FakeAnthropic() as server:
        settings.CTX_PROXY_UPSTREAM_URL = server.base_url
        yield server


def request_body(turns: int, *, size: int = 10, stream: bool = False) -> dict[str, Any]:
    messages: list[dict[str, Any]] = []
    for n in range(turns):
        messages += [{"role": "user", "content": f"step {n}: " + "x" * size}, {"role": "assistant", "content": "ok"}]
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [*messages, {"role": "user", "content": "go on"}],
        "system": "You are careful.",
        "metadata": {"user_id": "agent-7"},
        "stream": stream,
    }


def post(client: Any, team: Any, raw: bytes, **extra: Any) -> tuple[Any, bytes]:
    response = client.post(
        PATH,
        data=raw,
        content_type="application/json",
        HTTP_CTXWEB_API_KEY=team.bob.key,
        HTTP_X_API_KEY="sk-x",
        **extra,
    )
    return response, b"".join(response.streaming_content) if response.streaming else response.content


def test_an_oversized_request_is_forwarded_answered_and_noted_on_its_session(team, upstream, client, api_as):
    api = api_as(team.bob)
    small = request_body(2)
    response, _ = post(client, team, json.dumps(small).encode())
    assert response.status_code == 200 and response["ctxweb-recorded"] == "yes"
    session = AgentSession.objects.get(pk=response["ctxweb-session"])
    stored = list(Message.objects.filter(session=session).values_list("seq", "content"))

    raw = json.dumps(request_body(60, size=200)).encode()  # the same conversation, grown past the limit
    assert len(raw) > LIMIT
    upstream.queue_reply("Still here.")
    response, answer = post(client, team, raw)

    assert response.status_code == 200 and json.loads(answer)["content"][0]["text"] == "Still here."
    assert upstream.requests_for("messages")[-1]["raw_body"].encode() == raw  # forwarded as it came
    assert response["ctxweb-recorded"] == "no" and response["ctxweb-session"] == str(session.pk)
    assert list(Message.objects.filter(session=session).values_list("seq", "content")) == stored
    status = api.get(f"/api/v1/sessions/{session.pk}/status/").json()
    assert any(
        f"a request of {len(raw):,} bytes" in w and "CTX_PROXY_RECORD_MAX_BYTES" in w for w in status["warnings"]
    )
    assert_sessions_read_back(team, api, client)


def test_an_oversized_first_request_makes_its_session_from_the_fields_that_name_it(team, upstream, client, api_as):
    body = {**request_body(60, size=200), "messages": request_body(60, size=200)["messages"]}
    body = {"messages": body["messages"], **{k: v for k, v in body.items() if k != "messages"}}  # messages first
    response, _ = post(client, team, json.dumps(body).encode())
    assert response.status_code == 200 and response["ctxweb-recorded"] == "no"
    session = AgentSession.objects.get(pk=response["ctxweb-session"])
    assert (session.model, session.system_prompt) == ("claude-sonnet-4-5", "You are careful.")
    assert session.external_id.startswith("agent-7#") and session.rejected_count == 1
    assert_sessions_read_back(team, api_as(team.bob), client)


def test_a_stream_is_recorded_up_to_the_limit_and_reaches_the_caller_whole(team, upstream, client, api_as):
    text = "".join(f"line {i} of a long answer. " for i in range(400))  # ~200 events, well past the limit
    upstream.queue_reply(text)
    response, answer = post(client, team, json.dumps(request_body(1, stream=True)).encode())

    said = "".join(
        json.loads(line[6:])["delta"].get("text", "")
        for line in answer.decode().splitlines()
        if line.startswith("data: ") and '"content_block_delta"' in line
    )
    assert said == text
    reply = Message.objects.filter(session_id=response["ctxweb-session"]).order_by("seq").last()
    assert reply is not None
    kept, note = reply.content[0]["text"], reply.content[-1]["text"]
    assert text.startswith(kept) and 0 < len(kept) < len(text)
    assert "past 4,000 bytes of stream, is not recorded" in note
    status = api_as(team.bob).get(f"/api/v1/sessions/{reply.session_id}/status/").json()
    assert status["token_source"] == "exact"  # the usage at the stream's end is read all the same


def test_a_whole_answer_over_the_limit_reaches_the_caller_whole_and_is_recorded_as_a_note(team, upstream, client):
    text = "y" * (3 * LIMIT)
    upstream.queue_reply(text)
    response, answer = post(client, team, json.dumps(request_body(1)).encode())
    assert response.status_code == 200 and json.loads(answer)["content"][0]["text"] == text
    reply = Message.objects.filter(session_id=response["ctxweb-session"]).order_by("seq").last()
    note = "[ctxweb: the model's answer was over CTX_PROXY_RECORD_MAX_BYTES (4,000 bytes) and is not recorded]"
    assert reply is not None and reply.content == [{"type": "text", "text": note}]


def test_a_chunked_request_is_forwarded_whole_and_recorded_where_the_server_reads_it(team, upstream, client):
    # What gunicorn gives a chunked request: the body taken apart from its chunks, ended where it ends.
    raw = json.dumps(request_body(1)).encode()
    environ = {"wsgi.input": io.BytesIO(raw), "wsgi.input_terminated": True, "CONTENT_LENGTH": ""}
    response, _ = post(client, team, raw, HTTP_TRANSFER_ENCODING="chunked", **environ)
    assert response.status_code == 200 and response["ctxweb-recorded"] == "yes"
    assert upstream.requests_for("messages")[-1]["raw_body"].encode() == raw
    assert Message.objects.filter(session_id=response["ctxweb-session"]).count() == 4


@pytest.mark.django_db(transaction=True)
def test_a_chunked_request_is_refused_where_the_server_cannot_read_it(team, upstream, live_server):
    # Django's own server (runserver, the live server) reads a body by its Content-Length only.
    where = urlsplit(live_server.url)
    raw = json.dumps(request_body(1)).encode()
    chunked = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (raw[:50], raw[50:])) + b"0\r\n\r\n"
    head = (
        f"POST {PATH} HTTP/1.1\r\nHost: {where.hostname}\r\nContent-Type: application/json\r\n"
        f"ctxweb-api-key: {team.bob.key}\r\nx-api-key: sk-x\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    # Sent in one write: the server may answer and close before it reads the chunks, and a write after
    # that would break the pipe before the answer is read.
    sock = socket.create_connection((where.hostname, where.port), timeout=30)
    sock.sendall(head.encode() + chunked)
    response = http.client.HTTPResponse(sock)
    response.begin()
    answer = json.loads(response.read())
    sock.close()
    assert response.status == 411 and "Content-Length" in answer["error"]["message"]
    assert upstream.requests_for("messages") == []


def test_the_head_of_a_body_is_read_without_the_rest():
    body = {"messages": [{"role": "user", "content": f"m{i}"} for i in range(10)], "model": "m", "system": "s"}
    head = head_of(json.dumps({**body, "metadata": {"user_id": "u"}, "tools": [{"name": "t"}]}).encode())
    assert head == {"messages": body["messages"][:4], "model": "m", "system": "s", "metadata": {"user_id": "u"}}
    assert head_of(b'{"model": "m", "messages": [' + b"[]," * 3_000_000 + b"[]]}") is None  # past the budget
    assert head_of(b'{"model": "m"') is None and head_of(b"[1]") is None
