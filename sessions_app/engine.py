"""The engine bound to this deployment's settings: the offline tokenizer, the summarizers (a model of
the policy's provider, or the offline extractive one; which, and with whose key, is
``services.summarizers``'s choice) and the exact counter.

``compaction/`` knows nothing of Django; this is the one place that builds its parts from settings.
"""

from __future__ import annotations

import hashlib
import hmac
from functools import lru_cache

from django.conf import settings

from compaction import redact
from compaction.openai_summarizer import OpenAISummarizer
from compaction.policy import Policy
from compaction.summarize import AnthropicSummarizer, ExtractiveSummarizer, ModelSummarizer
from compaction.tokens import ExactCounter, OfflineTokenizer


@lru_cache(maxsize=1)
def offline_tokenizer() -> OfflineTokenizer:
    return OfflineTokenizer()


@lru_cache(maxsize=1)
def redaction_key() -> bytes:
    """What the markers' fingerprints are made with: this deployment's own (from its secret key), so a
    fingerprint can't be matched against a guess elsewhere."""
    return hmac.new(settings.SECRET_KEY.encode(), b"ctxweb redaction fingerprints", hashlib.sha256).digest()


@lru_cache(maxsize=256)
def redaction_rules(off: tuple[str, ...], patterns: tuple[str, ...]) -> redact.Rules:
    """A policy's redaction settings as the engine's rules (patterns compiled once per set)."""
    return redact.Rules(key=redaction_key(), disabled=frozenset(off), patterns=redact.compile_patterns(patterns))


def offline_summarizer(policy: Policy) -> ExtractiveSummarizer:
    return ExtractiveSummarizer(offline_tokenizer(), policy.preserve_patterns)


def server_api_key(provider: str) -> str:
    """The deployment's own API key for ``provider`` (``ANTHROPIC_API_KEY``, ``OPENAI_API_KEY``), or ""."""
    return {"anthropic": settings.ANTHROPIC_API_KEY, "openai": settings.OPENAI_API_KEY}.get(provider, "")


def model_summarizer(policy: Policy, *, api_key: str) -> ModelSummarizer:
    """The policy's summarizer model, called through its provider's SDK with ``api_key``."""
    if policy.summarizer_provider == "openai":
        return OpenAISummarizer(
            api_key=api_key,
            model=policy.summarizer_model,
            base_url=settings.OPENAI_BASE_URL,
            timeout=settings.OPENAI_TIMEOUT,
            max_retries=0,  # the Celery task retries with backoff
            tokenizer=offline_tokenizer(),
        )
    return AnthropicSummarizer(
        api_key=api_key,
        model=policy.summarizer_model,
        base_url=settings.ANTHROPIC_BASE_URL,
        timeout=settings.ANTHROPIC_TIMEOUT,
        max_retries=0,
        tokenizer=offline_tokenizer(),
    )


def exact_counter() -> ExactCounter | None:
    if not settings.ANTHROPIC_API_KEY:
        return None
    return ExactCounter(
        api_key=settings.ANTHROPIC_API_KEY,
        base_url=settings.ANTHROPIC_BASE_URL,
        timeout=settings.ANTHROPIC_TIMEOUT,
        max_retries=settings.ANTHROPIC_MAX_RETRIES,
    )
