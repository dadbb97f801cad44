"""The engine bound to this deployment's settings: the offline tokenizer, the summarizer (Anthropic's
model when a key is configured, the offline extractive one otherwise) and the exact counter.

``compaction/`` knows nothing of Django; this is the one place that builds its parts from settings.
"""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings

from compaction.policy import Policy
from compaction.summarize import AnthropicSummarizer, ExtractiveSummarizer, Summarizer
from compaction.tokens import ExactCounter, OfflineTokenizer


@lru_cache(maxsize=1)
def offline_tokenizer() -> OfflineTokenizer:
    return OfflineTokenizer()


def offline_summarizer(policy: Policy) -> ExtractiveSummarizer:
    return ExtractiveSummarizer(offline_tokenizer(), policy.preserve_patterns)


def summarizer_for(policy: Policy) -> Summarizer:
    """Anthropic's model when a key is configured; the offline extractive summarizer otherwise."""
    if settings.ANTHROPIC_API_KEY:
        return AnthropicSummarizer(
            api_key=settings.ANTHROPIC_API_KEY,
            model=policy.summarizer_model,
            base_url=settings.ANTHROPIC_BASE_URL,
            timeout=settings.ANTHROPIC_TIMEOUT,
            max_retries=0,  # the Celery task retries with backoff
            tokenizer=offline_tokenizer(),
        )
    return offline_summarizer(policy)


def exact_counter() -> ExactCounter | None:
    if not settings.ANTHROPIC_API_KEY:
        return None
    return ExactCounter(
        api_key=settings.ANTHROPIC_API_KEY,
        base_url=settings.ANTHROPIC_BASE_URL,
        timeout=settings.ANTHROPIC_TIMEOUT,
        max_retries=settings.ANTHROPIC_MAX_RETRIES,
    )
