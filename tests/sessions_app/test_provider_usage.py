"""Each API's ``usage`` read into tokens by kind (``services/provider_usage.py``): Anthropic's as it
is; OpenAI's cached part taken out of the prompt it is counted in; what is missing or nonsense is 0."""

from __future__ import annotations

from compaction.model_prices import TokenUsage
from sessions_app.services.provider_usage import MAX_TOKENS, Used, anthropic_used, chat_used, responses_used


def test_anthropic_usage_is_read_kind_by_kind_with_its_tier():
    message = {
        "model": "claude-opus-4-1",
        "usage": {"input_tokens": 7, "cache_creation_input_tokens": 300, "cache_read_input_tokens": 900,
                  "output_tokens": 41, "service_tier": "priority"},
    }  # fmt: skip
    assert anthropic_used(message) == Used("claude-opus-4-1", TokenUsage(7, 300, 900, 41), "priority")


def test_openai_cached_tokens_are_cache_reads_out_of_the_prompt():
    usage = {"prompt_tokens": 1000, "prompt_tokens_details": {"cached_tokens": 768}, "completion_tokens": 9}
    chat = {"model": "gpt-4o", "service_tier": "flex", "usage": usage}
    assert chat_used(chat) == Used("gpt-4o", TokenUsage(input=232, cache_read=768, output=9), "flex")
    response = {"model": "gpt-5", "usage": {"input_tokens": 50, "input_tokens_details": {"cached_tokens": 80},
                                            "output_tokens": 3}}  # fmt: skip
    assert responses_used(response).tokens == TokenUsage(input=0, cache_read=50, output=3)  # never past the prompt


def test_what_is_missing_or_nonsense_counts_nothing():
    odd = {"model": 5, "usage": {"input_tokens": -3, "output_tokens": True, "cache_read_input_tokens": "9",
                                 "cache_creation_input_tokens": 10**400}}  # fmt: skip
    assert anthropic_used(odd) == Used() == chat_used(None) == responses_used({"usage": []})
    assert anthropic_used({"usage": {"output_tokens": MAX_TOKENS}}).tokens.output == MAX_TOKENS
