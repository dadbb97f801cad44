"""Anthropic's Messages API through ctxweb: ``POST /proxy/anthropic/v1/messages`` (streamed or not)
and ``…/v1/messages/count_tokens``, forwarded to ``CTX_PROXY_UPSTREAM_URL`` with the caller's own
``x-api-key`` / ``Authorization`` (passed on, never stored or logged) or the project's key; and
OpenAI's Chat Completions, ``POST /proxy/openai/v1/chat/completions``, forwarded to
``CTX_PROXY_OPENAI_URL`` (what differs between the two: ``proxy_dialects``). The caller is a ctxweb
user by the ``ctxweb-api-key`` header; ``ctxweb-project`` and ``ctxweb-session`` say where to record
(see ``services.proxy``). Status and body come back as the upstream sent them, a stream event by
event as it arrives, with the headers an API client reads (``proxy_headers.relayed``) and ctxweb's
``ctxweb-*``; one deadline bounds the whole wait (``compaction.http_deadline``). ctxweb's own refusals (no or a
wrong ctxweb key, no project, not a member) are answered in the API's own error format, so SDKs
show them.

When ctxweb itself fails (its database is down), the request is still forwarded, unrecorded
(``ctxweb-recorded: no``): the agent's history comes with its next request anyway."""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import httpx2
from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from compaction.http_deadline import Deadline
from compaction.transcripts.responses import CONTINUES, NO_REPLY
from sessions_app import steps
from sessions_app.api.proxy import body as proxy_body
from sessions_app.api.proxy import headers as proxy_headers
from sessions_app.api.proxy import limits as proxy_limits
from sessions_app.api.proxy.caller import budget_refusal, caller, member_refusal, project_key, project_of
from sessions_app.api.proxy.dialects import ANTHROPIC, OPENAI, RESPONSES, Dialect, error_type
from sessions_app.api.proxy.exchange import NO_ANSWER, Answer, Exchange, Meter, Relay
from sessions_app.api.proxy.headers import SESSION_HEADER, agent_session_header
from sessions_app.api.proxy.recorder import RECORDER
from sessions_app.errors import ServiceError
from sessions_app.services import proxy
from sessions_app.services.proxy import gaps as proxy_gaps
from sessions_app.services.proxy import identity as proxy_identity
from sessions_app.services.proxy import upstream as proxy_upstream
from sessions_app.services.proxy.wire import TooLong, Wire

log = logging.getLogger(__name__)

_client_lock = threading.Lock()
_clients: dict[str, httpx2.Client] = {}


def upstream(url: str) -> httpx2.Client:
    """One pooled client per process (and upstream URL), shared by the request threads."""
    base = url.rstrip("/")
    with _client_lock:
        if base not in _clients:
            # Each request's timeouts are what is left of its deadline (``compaction.http_deadline``).
            _clients[base] = httpx2.Client(base_url=base, follow_redirects=False)
        return _clients[base]


@csrf_exempt
def messages(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return _proxy(request, ANTHROPIC, "/v1/messages", record=True)


@csrf_exempt
def count_tokens(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return _proxy(request, ANTHROPIC, "/v1/messages/count_tokens", record=False, spends=False)


@csrf_exempt
def chat_completions(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return _proxy(request, OPENAI, "/v1/chat/completions", record=True)


@csrf_exempt
def responses(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    return _proxy(request, RESPONSES, "/v1/responses", record=True)


@csrf_exempt
def responses_compact(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    """The provider compacting a conversation for its client (Codex's remote compaction): forwarded; what
    it answers comes back in the client's next request, recorded there."""
    return _proxy(request, RESPONSES, "/v1/responses/compact", record=False)


def _proxy(
    request: HttpRequest, dialect: Dialect, path: str, *, record: bool, spends: bool = True
) -> HttpResponse | StreamingHttpResponse:
    """``spends``: the request costs money, so a budget past its limit refuses it (a count doesn't).
    Until it is sent upstream, the recorder's lanes give way to it."""
    with RECORDER.forwarding() as sent:
        return _forward(request, dialect, path, record=record, spends=spends, sent_upstream=sent)


def _forward(
    request: HttpRequest,
    dialect: Dialect,
    path: str,
    *,
    record: bool,
    spends: bool,
    sent_upstream: Callable[[], None],
) -> HttpResponse | StreamingHttpResponse:
    meter = Meter()  # the request's arrival: its TTFB and duration count from here
    if request.method != "POST":
        return dialect.refuse(405, "invalid_request_error", f"{request.method} is not allowed here; POST.")
    try:
        raw = proxy_body.read(request)
    except proxy_body.Unread as exc:
        return dialect.refuse(exc.status, exc.error_type, exc.message)
    # A body too large to record is forwarded unparsed: parsing alone takes several times its size.
    oversized = record and len(raw) > settings.CTX_PROXY_RECORD_MAX_BYTES
    body = proxy_limits.parsed(raw) if record and not oversized else None
    caller_key, refusal = caller(request, dialect)
    user = caller_key.user if caller_key is not None else None
    if refusal is None and user is not None:  # a member's, whatever the body, before anything goes or is written
        refusal = member_refusal(request, user, dialect)
    if refusal is None and caller_key is not None and spends:  # past a refusing budget: nothing goes upstream
        refusal = budget_refusal(request, caller_key, dialect)
    if refusal is not None:
        return refusal
    api_key = None
    if user is not None and not proxy_headers.carries_a_key(request):  # checked before anything is recorded
        api_key, refusal = project_key(request, user, dialect)
        if refusal is not None:
            return refusal
    exchange, recorded, extra = None, user is not None, {}
    if oversized and user is not None:
        noted, refusal = proxy_limits.note_oversized(request, user, raw, dialect, partial(project_of, request, user))
        if refusal is not None:
            return refusal
        if noted is not None:
            extra["ctxweb-session"] = str(noted)
    kept = dialect.recorded(body) if record and isinstance(body, dict) else None
    if kept is not None and isinstance(body, dict):
        kept, key = _continuing(request, user, kept)
        exchange, recorded, sent, refusal = _record_start(request, user, kept, body, dialect, key)
        if refusal is not None:
            return refusal
        if exchange is not None and caller_key is not None:
            exchange.meter = meter
            meter.user_id, meter.api_key_id = caller_key.user_id, caller_key.pk
            meter.model = str(body.get("model") or "")
        if sent.body is not None:
            raw = json.dumps(sent.body).encode()
            extra["ctxweb-compacted"] = str(sent.compaction_id)
            meter.compacted_id = sent.compaction_id
    deadline = Deadline(settings.CTX_PROXY_TIMEOUT)
    sent_upstream()
    try:
        answer = _answer(request, dialect, path, raw, body, exchange, extra, api_key, deadline)
    except httpx2.RequestError as exc:  # the request's messages are recorded all the same
        deadline.stop()
        _finish(exchange, None)
        return _unreachable(exc, dialect, deadline)
    except BaseException:
        deadline.stop()
        _finish(exchange, None)
        raise
    meter.first_byte = time.monotonic()  # the status line and headers are in
    extra["ctxweb-recorded"] = "yes" if recorded and (exchange is not None or not record) else "no"
    if exchange is not None:
        extra["ctxweb-session"] = str(exchange.session_id)
    streamed = answer.headers.get("content-type", "").startswith("text/event-stream")
    response: HttpResponse | StreamingHttpResponse
    if streamed:
        response = StreamingHttpResponse(Relay(answer, exchange, dialect, deadline), status=answer.status_code)
    else:
        chunks = answer.iter_bytes()  # decoded, as the caller gets it
        try:
            content, whole = proxy_limits.held(chunks)
        except httpx2.RequestError as exc:
            deadline.stop()
            answer.close()
            _finish(exchange, None, answer.status_code)  # answered: the request has its row, with no usage
            return _unreachable(exc, dialect, deadline)
        if not whole:  # too large to hold: the rest is relayed as it comes, and not recorded
            relay = Relay(answer, exchange, dialect, deadline, itertools.chain([content], chunks))
            response = StreamingHttpResponse(relay, status=answer.status_code)
        else:
            meter.last_byte = time.monotonic()
            deadline.stop()  # before the connection goes back to the pool
            answer.close()
            _finish(exchange, partial(_whole, dialect, content, answer.status_code), answer.status_code)
            response = HttpResponse(content, status=answer.status_code)
    for name, value in proxy_headers.relayed(answer.headers.multi_items(), streamed=streamed):
        response[name] = value
    for name, value in extra.items():
        response[name] = value
    return response


def _continuing(request: HttpRequest, user: Any, kept: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """A request that continues from a response the provider stored (``previous_response_id``) sends
    only its new input: when ctxweb recorded that response, what is recorded of the request is the
    history up to it and then the input, in that response's session (its external id); else the
    input alone, as it came."""
    response_id = kept.get(CONTINUES)
    if user is None or not isinstance(response_id, str):
        return kept, None
    try:
        found = proxy.proxy_continued(project_of(request, user), response_id)
    except (ServiceError, DatabaseError):  # told, or forwarded unrecorded, where the request is recorded
        return kept, None
    if found is None or not found[0].external_id:
        return kept, None
    session, history = found
    return {**kept, "messages": [*history, *kept["messages"]]}, session.external_id


def _record_start(
    request: HttpRequest,
    user: Any,
    body: dict[str, Any],
    sent: dict[str, Any],
    dialect: Dialect,
    key: str | None = None,
) -> tuple[Exchange | None, bool, proxy_upstream.Upstream, HttpResponse | None]:
    """The exchange to record of ``body`` (what is recorded of the request ``sent``; None when ctxweb
    can't record it now: the request goes upstream all the same and is counted as a gap), whether it
    is recorded, what goes upstream, or a refusal. ``key``: the conversation, when the request names
    it otherwise than its ``ctxweb-session`` header (the response it continues)."""
    header = key or request.headers.get(SESSION_HEADER, "").strip() or None
    conversation = proxy_identity.conversation_key(body, header, agent_session_header(request))
    # Where this request is counted if it goes upstream unrecorded (services.proxy.gap_key).
    gap = proxy_gaps.gap_key(proxy_headers.ctxweb_key(request), conversation)
    if user is None:  # the database could not tell whose key it is
        proxy_gaps.proxy_gap_note(gap)
        return None, False, proxy_upstream.Upstream(None), None
    try:
        exchange, upstream = _prepare(request, user, body, sent, conversation, gap, wire=dialect.wire, key=key)
        return exchange, True, upstream, None
    except ServiceError as exc:  # no project to record in, or no right to: the caller is told
        refusal = dialect.refuse(exc.status, error_type(exc.status), exc.detail)
        return None, False, proxy_upstream.Upstream(None), refusal
    except DatabaseError as exc:
        log.warning("proxy: recording failed, forwarding unrecorded: %s", type(exc).__name__)
    except Exception:  # ctxweb's own fault never stands between an agent and its model
        log.exception("proxy: recording failed, forwarding unrecorded")
    proxy_gaps.proxy_gap_note(gap)
    return None, False, proxy_upstream.Upstream(None), None


def _answer(
    request: HttpRequest,
    dialect: Dialect,
    path: str,
    raw: bytes,
    body: Any,
    exchange: Exchange | None,
    extra: dict[str, str],
    api_key: str | None,
    deadline: Deadline,
) -> httpx2.Response:
    """The upstream's answer to the request; a refusal as too long is compacted and sent once more."""
    answer = _send(request, dialect, path, raw, api_key, deadline)
    wire = dialect.wire
    if exchange is None or exchange.session is None or wire is None:
        return answer
    refusal = _too_long(answer, wire)
    if refusal is None:
        return answer
    try:  # compact now and try once more, before the caller sees the refusal
        retry = proxy_upstream.proxy_compact_for_retry(
            session=exchange.session, body=body, refusal=refusal, render=wire.render
        )
    except DatabaseError as exc:
        log.warning("proxy: session %s: no compaction for the retry: %s", exchange.session_id, type(exc).__name__)
        return answer
    if retry.body is None:
        return answer
    deadline.stop()
    answer.close()
    extra["ctxweb-compacted"] = str(retry.compaction_id)
    if exchange.meter is not None:
        exchange.meter.compacted_id = retry.compaction_id
    return _send(request, dialect, path, json.dumps(retry.body).encode(), api_key, deadline)


def _unreachable(exc: httpx2.RequestError, dialect: Dialect, deadline: Deadline) -> HttpResponse:
    if isinstance(exc, httpx2.TimeoutException) or deadline.passed:
        return dialect.refuse(504, "timeout_error", "ctxweb: the upstream API did not answer in time.")
    if isinstance(exc, httpx2.DecodingError):  # a Content-Encoding its body is not in
        return dialect.refuse(502, "api_error", "ctxweb: the upstream API's answer could not be decoded.")
    return dialect.refuse(502, "api_error", f"ctxweb: the upstream API could not be reached ({type(exc).__name__}).")


def _whole(dialect: Dialect, content: bytes, status: int) -> Answer:
    if status != 200:  # an error: no reply, no usage
        return NO_ANSWER
    body = proxy_limits.parsed(content)
    return Answer(dialect.reply_of(body), True, dialect.used_of(body))


def _finish(exchange: Exchange | None, read: Callable[[], Answer] | None, status: int | None = None) -> None:
    if exchange is not None:
        exchange.finish(read, status)


def _send(
    request: HttpRequest, dialect: Dialect, path: str, raw: bytes, api_key: str | None, deadline: Deadline
) -> httpx2.Response:
    client = upstream(dialect.upstream_url())
    headers = proxy_headers.forwarded(request)
    if api_key is not None:
        headers["x-api-key"] = api_key
    params = request.GET.urlencode() or None
    built = client.build_request("POST", path, content=raw, headers=headers, params=params, timeout=deadline.timeout())
    answer = client.send(built, stream=True)
    deadline.watch(answer)
    return answer


def _too_long(answer: httpx2.Response, wire: Wire) -> TooLong | None:
    """A 400 refusing the prompt as longer than the model's window (read here; the caller never sees
    it when the retry goes out)."""
    if answer.status_code != 400:
        return None
    answer.read()
    return wire.too_long(answer.content)


def _prepare(
    request: HttpRequest,
    user: Any,
    body: dict[str, Any],
    sent_body: dict[str, Any],
    conversation: str,
    gap: str,
    *,
    wire: Wire | None,
    key: str | None = None,
) -> tuple[Exchange, proxy_upstream.Upstream]:
    """The session the request belongs to, and what goes upstream (``body`` is what is recorded of the
    request ``sent_body``). The request's messages are recorded before it is forwarded only when the
    session's context may replace them (the project's ``proxy_compaction``, in an API with a ``wire``);
    otherwise with the reply, once the answer is out, so the caller's first byte waits for nothing but
    finding the session."""
    project = project_of(request, user)
    header = key or request.headers.get(SESSION_HEADER, "").strip() or None
    agent = proxy_identity.agent_conversation(body, header, agent_session_header(request))
    long_context = proxy.long_context_beta(request.headers.get("anthropic-beta", ""))
    session = proxy.proxy_session_for(
        user=user, project=project, key=conversation, body=body, agent=agent, long_context=long_context
    )
    conversation = session.external_id or conversation  # the agent's main conversation is keyed by its id
    sent = len(body["messages"]) if isinstance(body.get("messages"), list) else 0
    keeps_reply = not body.get(NO_REPLY)
    as_it_came = not keeps_reply or CONTINUES in body
    if wire is None or as_it_came or not proxy_upstream.compacts_upstream(session, body):
        # A client compacting its conversation itself goes as it came; so does one the provider holds.
        exchange = Exchange(session.pk, sent, pending=body, conversation=conversation, gap=gap, keeps_reply=keeps_reply)
        return exchange, proxy_upstream.Upstream(None)
    RECORDER.caught_up(session.pk)  # the reply and usage of the request before this one come first
    done = steps.proxy_request_record(session=session, body=body, key=conversation)
    if done.appended and proxy_upstream.proxy_compact_before_sending(done.session):  # the workers had not got to it
        done.session.refresh_from_db()
    upstream = proxy_upstream.proxy_upstream_request(session=done.session, body=sent_body, render=wire.render)
    # Begun last: an exchange begun is finished by whoever answers (the recorder waits for it).
    return Exchange(done.session.pk, sent, session=done.session, conversation=conversation, gap=gap), upstream
