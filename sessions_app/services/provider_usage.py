"""What a provider's answer says its model used, by kind of token, in each API's own words, read into
one shape (Anthropic's split: ``input`` is what the model read uncached). A figure that is missing,
negative, not a whole number, or past what any request can use (``MAX_TOKENS``) counts 0."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from compaction.model_prices import TokenUsage

# A thousand times the largest context window: a figure past it is no request's (a broken upstream), and
# neither it nor its cost would fit the row's columns.
MAX_TOKENS = 10**9


@dataclass(frozen=True)
class Used:
    model: str = ""  # the answer's own model ("" when it names none)
    tokens: TokenUsage = field(default_factory=TokenUsage)
    service_tier: str = ""


def anthropic_used(answer: Any) -> Used:
    """A Messages API ``message`` (whole, or put back together from its events)."""
    usage = _dict(_dict(answer).get("usage"))
    tokens = TokenUsage(
        input=_count(usage.get("input_tokens")),
        cache_write=_count(usage.get("cache_creation_input_tokens")),
        cache_read=_count(usage.get("cache_read_input_tokens")),
        output=_count(usage.get("output_tokens")),
    )
    return Used(_text(_dict(answer).get("model")), tokens, _text(usage.get("service_tier"), 50))


def chat_used(answer: Any) -> Used:
    """A ``chat.completion``: ``prompt_tokens`` counts the cached part too; OpenAI bills no cache writes."""
    usage = _dict(_dict(answer).get("usage"))
    cached = _count(_dict(usage.get("prompt_tokens_details")).get("cached_tokens"))
    return _openai(answer, usage.get("prompt_tokens"), cached, usage.get("completion_tokens"))


def responses_used(answer: Any) -> Used:
    """A Responses API ``response``: ``input_tokens`` counts the cached part too."""
    usage = _dict(_dict(answer).get("usage"))
    cached = _count(_dict(usage.get("input_tokens_details")).get("cached_tokens"))
    return _openai(answer, usage.get("input_tokens"), cached, usage.get("output_tokens"))


def codex_used(usage: Any, model: str | None) -> Used:
    """A Codex rollout's ``token_usage_record`` usage: ``input_tokens`` counts the cached part too,
    as OpenAI's figures do."""
    usage = _dict(usage)
    return _openai(
        {"model": model},
        usage.get("input_tokens"),
        _count(usage.get("cached_input_tokens")),
        usage.get("output_tokens"),
    )


def _openai(answer: Any, prompt: Any, cached: int, output: Any) -> Used:
    read = _count(prompt)
    cached = min(cached, read)  # a cached part past the whole is not believed beyond it
    tokens = TokenUsage(input=read - cached, cache_read=cached, output=_count(output))
    return Used(_text(_dict(answer).get("model")), tokens, _text(_dict(answer).get("service_tier"), 50))


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_TOKENS else 0


def _text(value: Any, limit: int = 200) -> str:
    return value[:limit] if isinstance(value, str) else ""  # as long as the row's column takes
