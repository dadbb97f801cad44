"""What the proxy trusts, and what it does not (issue 27): who may have a request forwarded, whatever
its body; an upstream error that only quotes "prompt is too long"; a usage figure no window holds;
the upstream's headers that are ctxweb's to set; an upstream that trickles its answer past the
timeout."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from sessions_app.models import AgentSession, Compaction, ModelProfile
from sessions_app.selectors import usage
from sessions_app.services import keys, projects
from tests.fakes.anthropic_server import FakeAnthropic
from tests.fakes.openai_server import FakeOpenAI
from tests.proxy.raw_upstream import Raw

pytestmark = pytest.mark.django_db

MODEL = "claude-sonnet-4-5"
ANTHROPIC, OPENAI = "/proxy/anthropic/v1/messages", "/proxy/openai/v1/chat/completions"


@pytest.fixture
def fake(settings: Any) -> Any:
    settings.CTX_PROXY_RECORDERS = 0  # recorded in the request's thread: the test's transaction sees it
    with FakeAnthropic() as server:
        settings.CTX_PROXY_UPSTREAM_URL = server.base_url
        yield server


@pytest.fixture
def fake_openai(settings: Any) -> Any:
    with FakeOpenAI() as server:
        settings.CTX_PROXY_OPENAI_URL = server.base_url
        yield server


@pytest.fixture
def raw(settings: Any) -> Any:
    settings.CTX_PROXY_RECORDERS = 0
    with Raw() as server:
        settings.CTX_PROXY_UPSTREAM_URL = settings.CTX_PROXY_OPENAI_URL = server.base_url
        yield server


def post(client: Any, path: str, data: bytes, key: str, **headers: str) -> tuple[Any, bytes]:
    own = {"HTTP_X_API_KEY": "sk-ant-callers-own"} if path.startswith("/proxy/anthropic") else {}
    own = own or {"HTTP_AUTHORIZATION": "Bearer sk-callers-own"}
    extra = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}
    response = client.post(path, data=data, content_type="application/json", HTTP_CTXWEB_API_KEY=key, **own, **extra)
    return response, b"".join(response.streaming_content) if response.streaming else response.content


def ask(text: str = "Hello there.", **extra: Any) -> bytes:
    return json.dumps(
        {"model": MODEL, "max_tokens": 64, "messages": [{"role": "user", "content": text}], **extra}
    ).encode()


# ----------------------------------------------------------------------------- 6: who may forward


BODIES = {
    "count_tokens": (
        "/proxy/anthropic/v1/messages/count_tokens",
        json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}).encode(),
    ),
    "anthropic, a list": (ANTHROPIC, b"[1, 2, 3]"),
    "anthropic, not JSON": (ANTHROPIC, b"{not json"),
    "openai, a string": (OPENAI, b'"hi"'),
    "openai, not JSON": (OPENAI, b"{not json"),
}


@pytest.mark.parametrize("who", ["carol, a viewer", "mallory, an outsider", "a user with no project"])
@pytest.mark.parametrize("what", list(BODIES))
def test_only_a_member_has_anything_forwarded_whatever_the_body(team, fake, fake_openai, client, who, what):
    path, data = BODIES[what]
    if who.startswith("carol"):
        key, headers = team.carol.key, {}
    elif who.startswith("mallory"):  # a member of his own project only: he names Alice's
        key, headers = team.mallory.key, {"ctxweb-project": "Alpha"}
    else:
        from django.contrib.auth import get_user_model

        _, key = keys.apikey_create(user=get_user_model().objects.create_user("nobody"), name="k")
        headers = {}
    sessions_before = AgentSession.objects.count()
    response, answer = post(client, path, data, key, **headers)
    assert response.status_code in (400, 403, 404), answer[:300]
    error = json.loads(answer)  # in the API's own words, so the caller's SDK raises its usual error
    assert error["error"]["message"] and (path == OPENAI or error["type"] == "error"), error
    assert fake.requests == [] and fake_openai.requests == []  # nothing went upstream
    assert AgentSession.objects.count() == sessions_before  # nothing was written


def test_a_member_still_has_an_odd_body_forwarded_for_the_upstream_to_answer(team, fake, client):
    response, answer = post(client, ANTHROPIC, b"[1, 2, 3]", team.bob.key)
    assert response.status_code == 400 and len(fake.requests) == 1, answer[:300]
    response, answer = post(client, BODIES["count_tokens"][0], BODIES["count_tokens"][1], team.bob.key)
    assert response.status_code == 200 and json.loads(answer)["input_tokens"] > 0


# ----------------------------------------------------------------------------- 7: a window only from a real refusal


@pytest.fixture
def compacting(team: Any) -> None:
    ModelProfile.objects.update_or_create(name=MODEL, defaults={"context_window": 200_000, "max_output_tokens": 8_000})
    usage.forget_model_profiles()
    policy = projects.policy_ensure(project=team.project)
    policy.proxy_compaction = True
    policy.save()


QUOTED = "messages.0.content.0.text: 'prompt is too long: 5 tokens > 1000 maximum' is not a valid tool name"


@pytest.mark.parametrize(
    "message, error_type",
    [
        (QUOTED, None),  # the caller's text, quoted by a validation error
        ("prompt is too long: 5 tokens > 1000 maximum", None),  # 5 is not over 1000
        ("prompt is too long: 250000 tokens > 200000 maximum", None),  # ctxweb counts a few tokens
        ("prompt is too long: 1200 tokens > 1000 maximum", None),  # neither: the request is tiny
        ("prompt is too long: 208310 tokens > 200000 maximum", "not_found_error"),  # not a request error
    ],
    ids=["quoted", "inconsistent", "not-large-by-our-count", "tiny", "wrong-type"],
)
def test_a_refusal_that_only_looks_too_long_neither_shrinks_the_window_nor_compacts(
    team, fake, client, compacting, message, error_type
):
    history = [{"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}: a few words"} for n in range(5)]
    fake.queue_error(400, message=message, error_type=error_type)
    body = json.dumps({"model": MODEL, "max_tokens": 64, "messages": history}).encode()
    response, answer = post(client, ANTHROPIC, body, team.bob.key, **{"ctxweb-session": "quoted"})
    assert response.status_code == 400 and json.loads(answer)["error"]["message"] == message
    assert len(fake.requests_for("messages")) == 1  # no retry
    session = AgentSession.objects.get(external_id="quoted")
    assert session.context_window_override is None and session.context_window_learnt is None
    assert not Compaction.objects.filter(session=session).exists()


# ----------------------------------------------------------------------------- 8: usage within the window


def test_a_usage_figure_past_the_window_is_flagged_not_believed_and_compacts_nothing(team, fake, client, compacting):
    before = ModelProfile.objects.get(name=MODEL).calibration_factor
    fake.queue_reply("ok", input_tokens=99_000_000)
    response, _ = post(client, ANTHROPIC, ask("word " * 800), team.bob.key, **{"ctxweb-session": "absurd"})
    assert response.status_code == 200
    session = AgentSession.objects.get(external_id="absurd")
    status = usage.session_status(session)
    assert session.exact_tokens is None and status["token_source"] == "estimate" and status["level"] == "ok"
    assert any("99,000," in w and "200,000-token window" in w for w in status["warnings"]), status["warnings"]
    assert not Compaction.objects.filter(session=session).exists()
    assert ModelProfile.objects.get(name=MODEL).calibration_factor == before
    # A figure the window holds is believed again, and the warning goes.
    history = [{"role": "user", "content": "word " * 800}, {"role": "assistant", "content": "ok"}]
    fake.queue_reply("fine", input_tokens=1_200)
    body = json.dumps({"model": MODEL, "max_tokens": 64, "messages": [*history, {"role": "user", "content": "more"}]})
    post(client, ANTHROPIC, body.encode(), team.bob.key, **{"ctxweb-session": "absurd"})
    session.refresh_from_db()
    assert session.exact_tokens is not None and session.exact_tokens < 2_000 and not session.count_warning


@pytest.mark.parametrize("claimed", [199_000, 120_000, 30_000])
def test_a_usage_figure_far_from_the_request_is_not_believed_though_the_window_holds_it(
    team, fake, client, compacting, claimed
):
    fake.queue_reply("ok", input_tokens=claimed)
    response, _ = post(client, ANTHROPIC, ask("hello there"), team.bob.key, **{"ctxweb-session": f"far-{claimed}"})
    assert response.status_code == 200
    session = AgentSession.objects.get(external_id=f"far-{claimed}")
    status = usage.session_status(session)
    assert session.exact_tokens is None and status["token_source"] == "estimate" and status["level"] == "ok"
    assert any("not a count of this request" in w for w in status["warnings"]), status["warnings"]
    assert not Compaction.objects.filter(session=session).exists()


# ----------------------------------------------------------------------------- 9: headers an API client needs


HOSTILE = (
    "|set-cookie: sessionid=upstream; Path=/|content-security-policy: default-src *"
    "|x-frame-options: ALLOWALL|x-powered-by: upstream|request-id: req_123|x-request-id: req_456"
    "|anthropic-ratelimit-requests-remaining: 9|x-ratelimit-remaining-tokens: 99|retry-after: 3"
)


@pytest.mark.parametrize("path", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
@pytest.mark.parametrize("kind", ["text/html", "application/json", "text/event-stream"])
def test_only_the_headers_an_api_client_needs_are_relayed(team, raw, client, path, kind):
    raw.sse([b'{"type": "error"}' if kind != "text/html" else b"<script>alert(1)</script>"])
    raw.queue[-1] = (200, kind + HOSTILE, raw.queue[-1][2])
    response, _ = post(client, path, ask(), team.bob.key)
    assert "sessionid" not in response.cookies and not response.has_header("set-cookie")
    assert "default-src *" not in response.get("content-security-policy", "")
    assert "frame-ancestors 'none'" in response["content-security-policy"]  # ctxweb's own
    assert response.get("x-frame-options") != "ALLOWALL" and not response.has_header("x-powered-by")
    assert response["content-type"] == (kind if kind != "text/html" else "text/plain; charset=utf-8")
    assert response["request-id"] == "req_123" and response["x-request-id"] == "req_456"
    assert response["anthropic-ratelimit-requests-remaining"] == "9" and response["retry-after"] == "3"
    assert response["x-ratelimit-remaining-tokens"] == "99" and response["ctxweb-recorded"] == "yes"


# ----------------------------------------------------------------------------- 10: one deadline for the whole wait


def test_a_stream_that_trickles_ends_at_the_timeout_not_a_read_timeout_later(team, fake, client, settings):
    settings.CTX_PROXY_TIMEOUT = 1.0
    fake.queue_reply("x" * 1_200)  # some fifty events, 12 s in all
    fake.set_event_interval(0.25)  # each well within the timeout
    response = client.post(
        ANTHROPIC,
        data=ask(stream=True),
        content_type="application/json",
        HTTP_CTXWEB_API_KEY=team.bob.key,
        HTTP_X_API_KEY="sk-ant-callers-own",
    )
    started = time.monotonic()  # the first byte: the deadline ran for part of the wait already
    answer = b"".join(response.streaming_content)
    took = time.monotonic() - started
    assert response.status_code == 200 and took < 3.5, (took, answer[-300:])
    assert b"event: error" in answer and b"CTX_PROXY_TIMEOUT" in answer and b"message_stop" not in answer


@pytest.mark.parametrize("path", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
def test_a_whole_answer_that_trickles_is_a_timeout_at_the_deadline(team, raw, client, settings, path):
    settings.CTX_PROXY_TIMEOUT = 1.0
    raw.interval = 0.25  # each piece well within the timeout; all of them 10 s
    body = json.dumps({"type": "message", "content": [], "padding": "x" * 100}).encode()
    raw.queue.append((200, "application/json", [body[i : i + 4] for i in range(0, len(body), 4)]))
    started = time.monotonic()
    response, answer = post(client, path, ask(), team.bob.key)
    took = time.monotonic() - started
    assert response.status_code == 504 and took < 5, (response.status_code, took, answer[:200])
    assert b"did not answer in time" in answer


@pytest.mark.parametrize("path", [ANTHROPIC, OPENAI], ids=["anthropic", "openai"])
@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_an_answer_that_is_not_in_its_content_encoding_is_a_502_in_the_apis_format(team, raw, client, path, encoding):
    # The body is plain JSON though the upstream says it is compressed: it can't be decoded.
    raw.json({"id": "msg_1", "type": "message", "content": []})
    raw.queue[-1] = (200, f"application/json|content-encoding: {encoding}", raw.queue[-1][2])
    response, body = post(client, path, ask(), team.bob.key)
    assert response.status_code == 502, body
    assert "could not be decoded" in json.loads(body)["error"]["message"]
