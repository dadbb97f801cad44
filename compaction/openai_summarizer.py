"""``OpenAISummarizer``: an OpenAI model writes the checkpoint, through the official ``openai`` SDK
(Chat Completions, a JSON object as the answer). The prompt, the schema, the repair attempt and the
errors are ``ModelSummarizer``'s, as for Anthropic's models."""

from __future__ import annotations

from typing import Any

from . import openai_calls
from .model_summarizer import SYSTEM_PROMPT, ModelSummarizer


class OpenAISummarizer(ModelSummarizer):
    provider = "openai"

    def _client(self) -> Any:
        return openai_calls.client(api_key=self.api_key, base_url=self.base_url)

    def _ask(self, client: Any, conversation: list[dict[str, Any]], budget: int) -> str:
        response = openai_calls.call(
            lambda seconds: client.chat.completions.create(
                model=self.model,
                # max_completion_tokens, not max_tokens: the reasoning models (o3, gpt-5) take only it.
                max_completion_tokens=max(1024, budget * 3),
                messages=[{"role": "system", "content": SYSTEM_PROMPT}, *conversation],
                response_format={"type": "json_object"},
                timeout=seconds,
            ),
            timeout=self.timeout,
            max_retries=self.max_retries,
        )
        choices = response.choices or []
        return (choices[0].message.content or "") if choices else ""
