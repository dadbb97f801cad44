"""One ``ProviderRequest`` row per proxied exchange: every kind of token the upstream's ``usage``
reported, for Anthropic's Messages, OpenAI's Chat Completions and its Responses API, streamed or
not; the session's cost equal to its requests priced straight from the genai-prices package; an
upstream's error as a row with its status and no tokens; one row however often an exchange is
recorded; latency as measured at the proxy."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Any

import anthropic
import genai_prices
import openai
import pytest

from sessions_app.models import AgentSession, ProviderRequest
from sessions_app.selectors.spend import session_spend
from tests.conftest import Team
from tests.fakes.openai_server import FakeOpenAI, count_tokens_for
from tests.proxy_client import as_kept, sdk_reply

pytestmark = pytest.mark.django_db(transaction=True)

CLAUDE = "claude-sonnet-4-5"
GPT = "gpt-4o"
CALLER_KEY = "sk-callers-own-key-0123456789"
KINDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


@pytest.fixture
def fake_openai(settings: Any) -> Any:
    with FakeOpenAI() as server:
        settings.CTX_PROXY_OPENAI_URL = server.base_url
        yield server


def claude(proxy_sdk: Any, team: Team) -> anthropic.Anthropic:
    return proxy_sdk({"ctxweb-api-key": team.bob.key}, api_key=CALLER_KEY)


def gpt(proxy_openai_sdk: Any, team: Team) -> openai.OpenAI:
    return proxy_openai_sdk({"ctxweb-api-key": team.bob.key}, api_key=CALLER_KEY)


def rows(team: Team) -> list[ProviderRequest]:
    session = AgentSession.objects.get(project=team.project)
    return list(ProviderRequest.objects.filter(session=session).order_by("created_at", "pk"))


def kinds(row: ProviderRequest) -> tuple[int, ...]:
    return tuple(getattr(row, kind) for kind in KINDS)


def priced(model: str, provider: str, read: int, cache_write: int, cache_read: int, output: int) -> Decimal:
    """What the package itself says a request cost (its ``input_tokens`` counts the cached part too)."""
    used = genai_prices.Usage(
        input_tokens=read, cache_write_tokens=cache_write, cache_read_tokens=cache_read, output_tokens=output
    )
    return genai_prices.calc_price(used, model, provider_id=provider).total_price


def same_money(a: Decimal, b: Decimal) -> bool:
    return a.quantize(Decimal("1e-9")) == b.quantize(Decimal("1e-9"))


CACHED = [  # per turn: what the fake adds to the usage it computes (cache writes and reads)
    {"cache_creation_input_tokens": 1200, "cache_read_input_tokens": 0, "service_tier": "standard"},
    {"cache_creation_input_tokens": 300, "cache_read_input_tokens": 1200, "service_tier": "standard"},
    {"cache_creation_input_tokens": 0, "cache_read_input_tokens": 1500, "service_tier": "standard"},
]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_anthropic_every_kind_is_stored_per_request_and_the_cost_is_the_packages(proxy_sdk, team, fake, stream):
    client, history = claude(proxy_sdk, team), []
    started = time.time()
    for n, extra in enumerate(CACHED):
        history.append({"role": "user", "content": f"Step {n}: go on."})
        fake.queue_reply(f"Done with step {n}.", usage=extra)
        history.append(as_kept(sdk_reply(client, stream=stream, model=CLAUDE, max_tokens=256, messages=history)))
    stored, reported = rows(team), [r["usage"] for r in fake.requests_for("messages")]
    assert len(stored) == len(reported) == 3
    for row, usage in zip(stored, reported, strict=True):
        assert kinds(row) == tuple(usage[kind] for kind in KINDS)
        assert row.service_tier == usage["service_tier"] and row.status == 200 and row.model == CLAUDE
        assert (row.user_id, row.api_key_id, row.source) == (team.bob.user.pk, team.bob.user.api_keys.get().pk, "proxy")
        assert row.compacted_id is None and started <= row.created_at.timestamp() <= time.time()
        assert row.ttfb_ms is not None and row.duration_ms is not None and 0 < row.ttfb_ms <= row.duration_ms
    assert all(row.cache_read_input_tokens and row.input_tokens for row in stored[1:])  # every kind seen
    expected = sum(
        priced(
            CLAUDE,
            "anthropic",
            u["input_tokens"] + u["cache_creation_input_tokens"] + u["cache_read_input_tokens"],
            u["cache_creation_input_tokens"],
            u["cache_read_input_tokens"],
            u["output_tokens"],
        )
        for u in reported
    )
    spend = session_spend(AgentSession.objects.get(project=team.project))
    assert expected > 0 and same_money(spend.cost_usd, expected)
    assert spend.requests == 3 and spend.unpriced == 0
    assert spend.cache_read_input_tokens == sum(u["cache_read_input_tokens"] for u in reported) == 2700
    assert spend.output_tokens == sum(u["output_tokens"] for u in reported)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_openai_chat_cached_prompt_tokens_are_cache_reads(proxy_openai_sdk, team, fake_openai, stream):
    client, history = gpt(proxy_openai_sdk, team), [{"role": "system", "content": "Be brief. " * 40}]
    for n, cached in enumerate((None, 64, 128)):
        history.append({"role": "user", "content": f"Step {n}?"})
        fake_openai.queue_message(f"Step {n} done.", cached_tokens=cached, service_tier="default")
        options: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}} if stream else {}
        answer = client.chat.completions.create(model=GPT, messages=history, **options)
        text = "".join(c.choices[0].delta.content or "" for c in answer if c.choices) if stream else None
        history.append({"role": "assistant", "content": text if stream else answer.choices[0].message.content})
    stored, sent = rows(team), fake_openai.requests
    assert len(stored) == len(sent) == 3
    expected = Decimal(0)
    for row, request, cached in zip(stored, sent, (0, 64, 128), strict=True):
        prompt = count_tokens_for(request["body"])
        assert kinds(row) == (prompt - cached, 0, cached, row.output_tokens) and row.output_tokens > 0
        assert row.service_tier == "default" and row.status == 200 and row.model == GPT
        expected += priced(GPT, "openai", prompt, 0, cached, row.output_tokens)
    spend = session_spend(AgentSession.objects.get(project=team.project))
    assert expected > 0 and same_money(spend.cost_usd, expected)


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_openai_responses_usage_is_stored_by_kind(proxy_openai_sdk, team, fake_openai, stream):
    client, items = gpt(proxy_openai_sdk, team), [{"role": "user", "content": "Read a.py. " * 30}]
    for n in range(3):
        fake_openai.responses.queue_text(f"Step {n} done.")
        answer = client.responses.create(model=GPT, input=items, prompt_cache_key="conversation-1", stream=stream)
        if stream:
            done = [event.response for event in answer if event.type == "response.completed"]
            text = done[0].output_text
        else:
            text = answer.output_text
        items = [*items, {"role": "assistant", "content": text}, {"role": "user", "content": f"And {n}?"}]
    stored, answered = rows(team), fake_openai.responses.answered
    assert len(stored) == len(answered) == 3
    expected = Decimal(0)
    for row, response in zip(stored, answered, strict=True):
        usage = response["usage"]
        cached = usage["input_tokens_details"]["cached_tokens"]
        assert kinds(row) == (usage["input_tokens"] - cached, 0, cached, usage["output_tokens"])
        expected += priced(GPT, "openai", usage["input_tokens"], 0, cached, usage["output_tokens"])
    assert stored[0].cache_read_input_tokens == 0 < stored[2].cache_read_input_tokens  # the prefix was cached
    assert same_money(session_spend(AgentSession.objects.get(project=team.project)).cost_usd, expected)


def test_an_upstream_error_is_a_row_with_its_status_and_no_tokens(proxy_sdk, team, fake):
    client = claude(proxy_sdk, team)
    fake.queue_reply("First.", usage={"cache_read_input_tokens": 50})
    client.messages.create(model=CLAUDE, max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    fake.queue_error(529)
    with pytest.raises(anthropic.APIStatusError):
        client.messages.create(model=CLAUDE, max_tokens=16, messages=[{"role": "user", "content": "hi"}])
    ok, failed = rows(team)
    assert ok.status == 200 and ok.cache_read_input_tokens == 50
    assert failed.status == 529 and kinds(failed) == (0, 0, 0, 0) and failed.model == CLAUDE
    assert failed.cost_usd == 0 and failed.ttfb_ms is not None
    assert session_spend(ok.session).cost_usd == ok.cost_usd > 0


def test_streamed_latency_is_measured_from_arrival_to_the_first_and_last_bytes(proxy_sdk, team, fake):
    fake.set_event_interval(0.05)  # the fake's events come apart: the last byte comes well after the first
    sdk_reply(
        claude(proxy_sdk, team), stream=True, model=CLAUDE, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
    )
    (row,) = rows(team)
    assert row.ttfb_ms is not None and row.duration_ms is not None
    assert row.duration_ms - row.ttfb_ms >= 5 * 50 * 0.9  # a stream of at least six events


def test_an_openai_error_is_a_row_too(proxy_openai_sdk, team, fake_openai):
    fake_openai.queue_error(429, "Rate limit reached", code="rate_limit_exceeded")
    with pytest.raises(openai.RateLimitError):
        gpt(proxy_openai_sdk, team).chat.completions.create(model=GPT, messages=[{"role": "user", "content": "hi"}])
    (row,) = rows(team)
    assert (row.status, kinds(row), row.model, row.service_tier) == (429, (0, 0, 0, 0), GPT, "")


MODEL, WINDOW = "tiny-window-model", 8_000  # ``small_window``'s: a small window, and no price


def test_a_request_sent_as_the_compacted_context_names_its_compaction(proxy_sdk, team, fake, small_window):
    client = proxy_sdk({"ctxweb-api-key": team.bob.key, "ctxweb-session": "long-run"}, api_key=CALLER_KEY)
    history: list[dict[str, Any]] = []
    for n in range(60):
        history.append({"role": "user", "content": f"Step {n}:\n" + f"src/module_{n}.py checked ok\n" * 40})
        fake.queue_reply(f"Step {n} is fine.")
        answer = client.messages.with_raw_response.create(model=MODEL, max_tokens=64, messages=history)
        history.append(as_kept(answer.parse()))
        if "ctxweb-compacted" in answer.headers:
            break
    else:
        pytest.fail("no request went upstream as the compacted context")
    *before, last = ProviderRequest.objects.filter(session__external_id="long-run").order_by("created_at", "pk")
    assert last.compacted_id == int(answer.headers["ctxweb-compacted"]) and last.compacted_id is not None
    assert before and all(row.compacted_id is None for row in before)
    assert last.cost_usd is None and last.input_tokens > 0  # a model without a price: tokens, no cost


def test_a_stream_without_usage_is_estimated_and_says_so(proxy_openai_sdk, team, fake_openai):
    """A chat stream the caller didn't ask usage of reports none: its row holds ctxweb's estimate of
    the request and its reply (STATUS's figures once the exchange is recorded), marked ``estimated``,
    priced like any; one that reports usage is not marked."""
    from sessions_app.selectors.usage import session_status

    client, history = gpt(proxy_openai_sdk, team), [{"role": "user", "content": "Explain the build. " * 20}]
    fake_openai.queue_message("The build runs lint, then the tests, then packages the wheel.")
    answer = client.chat.completions.create(model=GPT, messages=history, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in answer if c.choices)
    assert text
    (row,) = rows(team)
    session = AgentSession.objects.get(project=team.project)
    status = session_status(session)
    assert row.estimated and row.status == 200
    assert row.input_tokens + row.output_tokens == status["used"] and row.output_tokens > 0 and row.input_tokens > 0
    assert same_money(row.cost_usd, priced(GPT, "openai", row.input_tokens, 0, 0, row.output_tokens))

    history += [{"role": "assistant", "content": text}, {"role": "user", "content": "And the wheel?"}]
    fake_openai.queue_message("It goes to dist/.")
    answer = client.chat.completions.create(
        model=GPT, messages=history, stream=True, stream_options={"include_usage": True}
    )
    assert "".join(c.choices[0].delta.content or "" for c in answer if c.choices)
    reported = rows(team)[1]
    assert not reported.estimated and reported.input_tokens == count_tokens_for(fake_openai.requests[1]["body"])
